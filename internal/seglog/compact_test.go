package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

const (
	testTs0        = 1_000_000 // timestamp of the first batch of a compaction test
	testRetention  = 10_000    // delete.retention.ms of compaction tests
	farFuture      = 1 << 50   // a now at which every tombstone has expired
	deletedKeys    = 5         // keys 0..4 end deleted
	resurrectedTop = 10        // keys 5..9 are deleted at version 2 and set again
	testKeys       = 40
	testVersions   = 8
	segmentBytes   = 2048
	bigSegment     = 1 << 20
	maxReadBytes   = 700
	everything     = 1 << 30
	afterWorkload  = testTs0 + 10_000 // later than every workload timestamp
	withinRetained = afterWorkload    // now - largest timestamp < testRetention
)

func compactConfig() Config {
	cfg := smallConfig()
	cfg.SegmentBytes = segmentBytes
	cfg.Compact = true
	cfg.Delete = false
	cfg.DeleteRetentionMs = testRetention
	cfg.MinCleanableDirtyRatio = 0.5
	return cfg
}

// fillKeyed appends testVersions versions of testKeys keys in batches of
// 1 to 4 records, one timestamp per batch from ts0. Keys 0..4 get a
// tombstone as their last version; keys 5..9 get one at version 2 and are
// set again after it. It returns the next timestamp.
func fillKeyed(m *keyedLog, ts0 int64) int64 {
	ts := ts0
	var batch []kv
	flush := func() {
		if len(batch) > 0 {
			m.append(ts, batch...)
			ts++
			batch = nil
		}
	}
	for v := 0; v < testVersions; v++ {
		for i := 0; i < testKeys; i++ {
			switch {
			case i < deletedKeys && v == testVersions-2:
				batch = append(batch, tombstone(key(i)))
			case i < deletedKeys && v == testVersions-1:
				continue
			case i < resurrectedTop && v == 2:
				batch = append(batch, tombstone(key(i)))
			default:
				batch = append(batch, put(key(i), fmt.Sprintf("%s@%d", key(i), v)))
			}
			if len(batch) >= 1+(i+v)%4 {
				flush()
			}
		}
	}
	flush()
	return ts
}

// checkCompacted checks what a compaction must guarantee below the active
// segment: each key at most once, and that once its latest record.
func checkCompacted(t *testing.T, m *keyedLog, recs []keyedRecord) {
	t.Helper()
	active := activeBase(m.l)
	seen := map[string]bool{}
	for _, r := range recs {
		if r.offset >= active {
			break
		}
		k := string(r.key)
		if seen[k] {
			t.Fatalf("key %q kept twice below the active segment (offset %d)", k, r.offset)
		}
		seen[k] = true
		if latest := m.latest[k]; latest >= active || latest != r.offset {
			// Superseded by a record in the active segment is the only
			// excuse for an old record to remain.
			if latest < active {
				t.Fatalf("key %q kept at %d, its latest record is at %d", k, r.offset, latest)
			}
		}
	}
}

func mustCompact(t *testing.T, l *Log, now int64) CompactStats {
	t.Helper()
	st, err := l.Compact(time.UnixMilli(now))
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	return st
}

func TestCompactKeepsNewestValuePerKey(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, compactConfig())
	m := newKeyedLog(t, l)
	m.append(testTs0, kv{value: []byte("no key")}, put(key(20), "first"))
	fillKeyed(m, testTs0)
	m.append(afterWorkload, put(key(21), "final")) // the active segment gets at least this
	if n := len(segmentBases(l)); n < 5 {
		t.Fatalf("only %d segments", n)
	}
	end, start := l.EndOffset(), l.StartOffset()
	activePath := segmentPath(dir, activeBase(l), logSuffix)
	activeBefore, _ := os.ReadFile(activePath)
	before := m.readKeyed(everything)
	sameState(t, replay(before), m.live())

	st := mustCompact(t, l, withinRetained)
	if !st.Cleaned || st.RecordsRemoved == 0 || st.DirtyRatio != 1 || st.CleanedThrough != activeBase(l) {
		t.Fatalf("stats %+v", st)
	}
	if l.Swaps() == 0 {
		t.Fatal("the pass's swaps were not counted (Swaps): a reader of the whole log would not know")
	}
	if st.TombstonesRemoved != 0 {
		t.Fatalf("removed %d tombstones younger than delete.retention.ms", st.TombstonesRemoved)
	}
	if l.EndOffset() != end || l.StartOffset() != start {
		t.Fatalf("offsets moved: [%d, %d), was [%d, %d)", l.StartOffset(), l.EndOffset(), start, end)
	}
	if after, _ := os.ReadFile(activePath); !bytes.Equal(after, activeBefore) {
		t.Fatal("the active segment changed")
	}
	for _, maxBytes := range []int64{1, maxReadBytes, everything} {
		recs := m.readKeyed(maxBytes)
		sameState(t, replay(recs), m.live())
		checkCompacted(t, m, recs)
		if len(recs) >= len(before) {
			t.Fatalf("read %d records after compaction, %d before", len(recs), len(before))
		}
	}
	recs := m.readKeyed(everything)
	tombstones := 0
	for _, r := range recs {
		if r.key == nil {
			t.Fatal("a record without key survived compaction")
		}
		if r.value == nil {
			tombstones++
		}
	}
	if tombstones != deletedKeys {
		t.Fatalf("%d tombstones kept, want the %d latest ones", tombstones, deletedKeys)
	}
	checkReadsInsideGaps(t, l, recs)
	checkSegmentsOrdered(t, l)

	// The same after a clean reopen and after a crash (every closed segment
	// is then verified, gaps and all).
	l.Close()
	l = mustOpen(t, dir, compactConfig())
	m.l = l
	sameState(t, replay(m.readKeyed(maxReadBytes)), m.live())
	checkSegmentsOrdered(t, l)
	l.crash()
	os.Remove(filepath.Join(dir, recoveryPointFile))
	l = mustOpen(t, dir, compactConfig())
	defer l.Close()
	m.l = l
	if l.EndOffset() != end {
		t.Fatalf("end %d after reopen, want %d", l.EndOffset(), end)
	}
	got := m.readKeyed(maxReadBytes)
	sameState(t, replay(got), m.live())
	if len(got) != len(recs) {
		t.Fatalf("%d records after the crash, %d before", len(got), len(recs))
	}
	checkSegmentsOrdered(t, l)
	m.append(afterWorkload, put(key(0), "after reopen"))
	sameState(t, replay(m.readKeyed(everything)), m.live())
}

// checkReadsInsideGaps reads at every offset of the log, most of them
// removed by compaction, and checks that the first record returned at or
// after it is the next retained one.
func checkReadsInsideGaps(t *testing.T, l *Log, retained []keyedRecord) {
	t.Helper()
	i := 0
	for off := l.StartOffset(); off < l.EndOffset(); off++ {
		for i < len(retained) && retained[i].offset < off {
			i++
		}
		s, err := l.Read(off, 1)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		b, err := s.Bytes()
		s.Release()
		if err != nil || len(b) == 0 {
			t.Fatalf("Read(%d): %d bytes, %v", off, len(b), err)
		}
		first := int64(-1)
		for first < 0 && len(b) > 0 {
			h, err := record.Verify(b)
			if err != nil {
				t.Fatal(err)
			}
			recs, _ := record.Records(b[:h.Size()])
			for _, r := range recs {
				if o := h.BaseOffset + int64(r.OffsetDelta); o >= off {
					first = o
					break
				}
			}
			if first < 0 && h.LastOffset() < off {
				t.Fatalf("Read(%d) returned a batch ending at %d", off, h.LastOffset())
			}
			b = b[h.Size():]
		}
		switch {
		case i < len(retained) && first >= 0 && first != retained[i].offset:
			t.Fatalf("Read(%d) starts at record %d, want %d", off, first, retained[i].offset)
		case first < 0 && i < len(retained) && retained[i].offset < activeBase(l):
			// Only an empty batch (a segment's kept last offset) may come
			// back without a record, and the next record is then in a
			// later read.
			s, _ := l.Read(off, everything)
			b, _ := s.Bytes()
			s.Release()
			if !containsOffset(t, b, retained[i].offset) {
				t.Fatalf("Read(%d) never reaches record %d", off, retained[i].offset)
			}
		}
	}
}

func containsOffset(t *testing.T, b []byte, off int64) bool {
	for len(b) > 0 {
		h, err := record.Verify(b)
		if err != nil {
			t.Fatal(err)
		}
		recs, _ := record.Records(b[:h.Size()])
		for _, r := range recs {
			if h.BaseOffset+int64(r.OffsetDelta) == off {
				return true
			}
		}
		b = b[h.Size():]
	}
	return false
}

func TestCompactRemovesTombstonesAfterDeleteRetention(t *testing.T) {
	l := mustOpen(t, t.TempDir(), compactConfig())
	defer l.Close()
	m := newKeyedLog(t, l)
	ts := fillKeyed(m, testTs0)
	mustCompact(t, l, withinRetained)

	// New dirty data, so that another pass runs; by now every segment is
	// older than delete.retention.ms.
	for i := 0; activeBase(l) < l.EndOffset()-1 || i < 3; i++ {
		m.append(ts, put(key(30+i%5), fmt.Sprintf("late-%d", i)))
		if len(segmentBases(l)) > 12 {
			break
		}
	}
	m.append(ts, put(key(39), "tail"))
	st := mustCompact(t, l, farFuture)
	if !st.Cleaned || st.TombstonesRemoved != deletedKeys {
		t.Fatalf("stats %+v, want %d tombstones removed", st, deletedKeys)
	}
	recs := m.readKeyed(maxReadBytes)
	sameState(t, replay(recs), m.live())
	for _, r := range recs {
		if r.value == nil {
			t.Fatalf("tombstone of %q at %d kept past delete.retention.ms", r.key, r.offset)
		}
		for i := 0; i < deletedKeys; i++ {
			if string(r.key) == key(i) {
				t.Fatalf("deleted key %q still readable at %d", r.key, r.offset)
			}
		}
	}
	checkCompacted(t, m, recs)
}

func TestCompactDirtyRatioThreshold(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	m := newKeyedLog(t, l)
	ts := fillKeyed(m, testTs0)
	mustCompact(t, l, withinRetained)

	// A little new data: one or two dirty segments beside the clean ones.
	firstNew := l.EndOffset()
	for activeBase(l) < firstNew+1 {
		m.append(ts, put(key(1), "again"), put(key(2), "again"))
	}
	files := dirFiles(t, dir)
	cfg.MinCleanableDirtyRatio = 0.99
	l.SetConfig(cfg)
	st := mustCompact(t, l, withinRetained)
	if st.Cleaned || st.DirtyRatio <= 0 || st.DirtyRatio >= 0.99 {
		t.Fatalf("stats %+v: want no pass below the ratio", st)
	}
	if got := dirFiles(t, dir); len(got) != len(files) {
		t.Fatalf("files changed without a pass")
	}
	cfg.MinCleanableDirtyRatio = st.DirtyRatio
	l.SetConfig(cfg)
	if st := mustCompact(t, l, withinRetained); !st.Cleaned {
		t.Fatalf("stats %+v: want a pass at the ratio", st)
	}
	recs := m.readKeyed(everything)
	sameState(t, replay(recs), m.live())
	checkCompacted(t, m, recs)
}

func TestCompactHonoursMinCompactionLag(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	cfg.MinCompactionLagMs = 1000
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	m := newKeyedLog(t, l)
	// Two rounds of the workload, the second 5000 ms after the first.
	fillKeyed(m, testTs0)
	secondStart := l.EndOffset()
	fillKeyed(m, testTs0+5000)
	m.append(testTs0+6000, put(key(0), "last"))

	// At testTs0+5500 only the segments whose records all predate
	// testTs0+4500 may be compacted: the first round's, minus the one
	// holding the start of the second round.
	bases := segmentBases(l)
	uncleanable := bases[len(bases)-1]
	for i := len(bases) - 1; i >= 0 && bases[i] > secondStart-1; i-- {
		uncleanable = bases[i-1]
	}
	var young []string
	for _, b := range bases {
		if b >= uncleanable {
			young = append(young, segmentPath(dir, b, logSuffix))
		}
	}
	before := map[string][]byte{}
	for _, p := range young {
		before[p], _ = os.ReadFile(p)
	}
	st := mustCompact(t, l, testTs0+5500)
	if !st.Cleaned || st.CleanedThrough != uncleanable {
		t.Fatalf("stats %+v, want a pass through %d", st, uncleanable)
	}
	for _, p := range young {
		if after, _ := os.ReadFile(p); !bytes.Equal(after, before[p]) {
			t.Fatalf("%s was compacted though younger than min.compaction.lag.ms", p)
		}
	}
	sameState(t, replay(m.readKeyed(maxReadBytes)), m.live())

	// Later, everything closed may be compacted.
	st = mustCompact(t, l, testTs0+20_000)
	if !st.Cleaned || st.CleanedThrough != activeBase(l) {
		t.Fatalf("stats %+v", st)
	}
	recs := m.readKeyed(maxReadBytes)
	sameState(t, replay(recs), m.live())
	checkCompacted(t, m, recs)
}

func TestCompactMaxCompactionLagForcesPass(t *testing.T) {
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 1.1 // never reached
	cfg.MaxCompactionLagMs = 1000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	m := newKeyedLog(t, l)
	fillKeyed(m, testTs0)
	if st := mustCompact(t, l, testTs0+500); st.Cleaned {
		t.Fatalf("stats %+v: nothing is older than max.compaction.lag.ms yet", st)
	}
	if st := mustCompact(t, l, testTs0+1500); !st.Cleaned {
		t.Fatalf("stats %+v: the first dirty record is older than max.compaction.lag.ms", st)
	}
	sameState(t, replay(m.readKeyed(everything)), m.live())
}

func TestCompactIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, compactConfig())
	defer l.Close()
	m := newKeyedLog(t, l)
	fillKeyed(m, testTs0)
	mustCompact(t, l, withinRetained)
	files := dirFiles(t, dir)
	once := m.readKeyed(everything)

	if st := mustCompact(t, l, withinRetained); st.Cleaned {
		t.Fatalf("second pass with nothing dirty: %+v", st)
	}
	if got := dirFiles(t, dir); len(got) != len(files) {
		t.Fatal("files changed")
	}
	// Forget the checkpoint: the whole compacted log is dirty again. The
	// pass may merge segments but must keep exactly the same records.
	l.cleanMu.Lock()
	l.cleanerOffset = 0
	l.cleanMu.Unlock()
	st := mustCompact(t, l, withinRetained)
	if !st.Cleaned || st.RecordsRemoved != 0 {
		t.Fatalf("stats %+v: nothing should be left to remove", st)
	}
	twice := m.readKeyed(everything)
	if len(twice) != len(once) {
		t.Fatalf("%d records, %d after the first pass", len(twice), len(once))
	}
	for i := range once {
		if once[i].offset != twice[i].offset {
			t.Fatalf("record %d at offset %d, was %d", i, twice[i].offset, once[i].offset)
		}
	}
	checkSegmentsOrdered(t, l)
}

func TestCompactMergesSmallSegments(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	m := newKeyedLog(t, l)
	fillKeyed(m, testTs0)
	m.append(afterWorkload, put(key(0), "x"))
	closed := len(segmentBases(l)) - 1
	cfg.SegmentBytes = bigSegment
	l.SetConfig(cfg)
	st := mustCompact(t, l, withinRetained)
	if st.SegmentsRead != closed || st.SegmentsWritten != 1 {
		t.Fatalf("stats %+v, want %d segments merged into one", st, closed)
	}
	if n := len(segmentBases(l)); n != 2 {
		t.Fatalf("%d segments, want the merged one and the active one", n)
	}
	if n := len(segmentFiles(t, dir)); n != 2 {
		t.Fatalf("%d .log files", n)
	}
	sameState(t, replay(m.readKeyed(maxReadBytes)), m.live())
	checkSegmentsOrdered(t, l)
}

// TestCompactKeepsEndOffset covers segments whose last records are all
// superseded, and segments with nothing left: the offsets after them stay
// readable, the log start stays, and the end offset survives a reopen even
// with an empty active segment after a gap.
func TestCompactKeepsEndOffset(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, compactConfig())
	m := newKeyedLog(t, l)
	// Every batch ends with the same key, so every segment ends with a
	// superseded record; the first segments hold only keys written again
	// later, so nothing of them is left.
	for i := 0; len(segmentBases(l)) < 5; i++ {
		m.append(testTs0, put(key(i%3), fmt.Sprint(i)), put("heartbeat", fmt.Sprint(i)))
	}
	for i := 0; len(segmentBases(l)) < 8; i++ {
		m.append(testTs0+int64(i), put(key(10+i), fmt.Sprint(i)), put("heartbeat", fmt.Sprint(i)))
	}
	m.append(testTs0, put(key(0), "last"), put(key(1), "last"), put(key(2), "last"))
	start, end := l.StartOffset(), l.EndOffset()
	closedBefore := len(segmentBases(l)) - 1
	st := mustCompact(t, l, withinRetained)
	if st.SegmentsRead != closedBefore || len(segmentBases(l))-1 >= closedBefore {
		t.Fatalf("stats %+v, %d segments: want segments with nothing left deleted", st, len(segmentBases(l)))
	}
	if segmentBases(l)[0] != start {
		t.Fatalf("first segment %d, want the log start %d kept", segmentBases(l)[0], start)
	}
	checkSegmentsOrdered(t, l)
	recs := m.readKeyed(1)
	sameState(t, replay(recs), m.live())
	checkReadsInsideGaps(t, l, recs)

	// An empty active segment after a gap: what a crash right after a roll
	// leaves. Its base is the end offset and must survive the reopen.
	l.crash()
	l = mustOpen(t, dir, compactConfig())
	m.l = l
	if l.StartOffset() != start || l.EndOffset() != end {
		t.Fatalf("offsets [%d, %d) after reopen, want [%d, %d)", l.StartOffset(), l.EndOffset(), start, end)
	}
	bases := segmentBases(l)
	active := segmentPath(dir, bases[len(bases)-1], logSuffix)
	l.Close()
	for _, suffix := range segmentSuffixes {
		os.Remove(strings.TrimSuffix(active, logSuffix) + suffix)
	}
	os.WriteFile(segmentPath(dir, end, logSuffix), nil, 0o644)
	for off := range m.byOffset {
		if off >= bases[len(bases)-1] {
			delete(m.byOffset, off) // the active segment's records are gone with it
		}
	}
	l = mustOpen(t, dir, compactConfig())
	defer l.Close()
	m.l = l
	if l.EndOffset() != end {
		t.Fatalf("end %d after reopen with an empty active segment, want %d", l.EndOffset(), end)
	}
	checkSegmentsOrdered(t, l)
	// Nothing lies between the last kept batch and the end: a read there
	// is empty until the next append, as at the end of the log.
	m.append(testTs0, put("after", "reopen"))
	if got := m.readKeyed(everything); got[len(got)-1].offset != end {
		t.Fatalf("next append at %d, want %d", got[len(got)-1].offset, end)
	}
}

func TestCompactCrash(t *testing.T) {
	for _, step := range []string{"cleaned", "swap"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			cfg := compactConfig()
			l := mustOpen(t, dir, cfg)
			m := newKeyedLog(t, l)
			fillKeyed(m, testTs0)
			m.append(afterWorkload, put(key(0), "x"))
			before := m.readKeyed(everything)
			// One group of every closed segment, so that the swap replaces
			// several files.
			cfg.SegmentBytes = bigSegment
			l.SetConfig(cfg)
			crashPoint = func(s string) bool { return s == step }
			_, err := l.Compact(time.UnixMilli(withinRetained))
			crashPoint = nil
			if !errors.Is(err, errSimulatedCrash) {
				t.Fatalf("Compact: %v", err)
			}
			l.crash()
			if n := len(filesWithSuffix(t, dir, "."+step)); n != 3 {
				t.Fatalf("%d .%s files left by the crash, want 3", n, step)
			}

			l = mustOpen(t, dir, cfg)
			defer l.Close()
			m.l = l
			for _, suffix := range []string{cleanedSuffix, swapSuffix} {
				if left := filesWithSuffix(t, dir, suffix); len(left) != 0 {
					t.Fatalf("files left after Open: %v", left)
				}
			}
			recs := m.readKeyed(maxReadBytes)
			sameState(t, replay(recs), m.live())
			checkSegmentsOrdered(t, l)
			switch step {
			case "cleaned": // rolled back: nothing was compacted
				if len(recs) != len(before) {
					t.Fatalf("%d records, want all %d", len(recs), len(before))
				}
			case "swap": // rolled forward: the one group is in
				if n := len(segmentBases(l)); n != 2 {
					t.Fatalf("%d segments, want the compacted one and the active one", n)
				}
				checkCompacted(t, m, recs)
			}
			// A pass after recovery finishes the job.
			mustCompact(t, l, withinRetained)
			recs = m.readKeyed(maxReadBytes)
			sameState(t, replay(recs), m.live())
			checkCompacted(t, m, recs)
		})
	}
}

func TestCompactOffsetMapBudget(t *testing.T) {
	saved := offsetMapBudget
	offsetMapBudget = 1 // one dirty segment per pass
	defer func() { offsetMapBudget = saved }()
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	m := newKeyedLog(t, l)
	fillKeyed(m, testTs0)
	m.append(afterWorkload, put(key(0), "x"))
	passes := 0
	for ; passes < 50; passes++ {
		st := mustCompact(t, l, withinRetained)
		if !st.Cleaned {
			break
		}
		sameState(t, replay(m.readKeyed(maxReadBytes)), m.live())
	}
	if passes < 3 {
		t.Fatalf("%d passes; the budget should have split the work", passes)
	}
	recs := m.readKeyed(maxReadBytes)
	sameState(t, replay(recs), m.live())
	checkCompacted(t, m, recs)
}

func TestCompactAlongsideAppendsAndReaders(t *testing.T) {
	l := mustOpen(t, t.TempDir(), compactConfig())
	defer l.Close()
	m := newKeyedLog(t, l)
	ts := fillKeyed(m, testTs0)
	// A slice taken before the pass keeps reading the old files after it.
	held, err := l.Read(0, everything)
	if err != nil {
		t.Fatal(err)
	}
	heldBefore, _ := held.Bytes()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			m.append(ts+int64(i), put(key(i%testKeys), fmt.Sprint("concurrent-", i)))
		}
	}()
	for i := 0; i < 5; i++ {
		if _, err := l.Compact(time.UnixMilli(withinRetained)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	heldAfter, err := held.Bytes()
	held.Release()
	if err != nil || !bytes.Equal(heldAfter, heldBefore) {
		t.Fatalf("a slice held across compaction changed (%v)", err)
	}
	// However the passes and the appends interleaved, the last pass must
	// clean whatever they left dirty: below min.cleanable.dirty.ratio it
	// would rightly do nothing, and leave superseded records behind.
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0
	l.SetConfig(cfg)
	mustCompact(t, l, withinRetained)
	recs := m.readKeyed(maxReadBytes)
	sameState(t, replay(recs), m.live())
	checkCompacted(t, m, recs)
}

func TestCompactOnlyWithCompactPolicy(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	m := newKeyedLog(t, l)
	fillKeyed(m, testTs0)
	before := len(m.readKeyed(everything))
	if st := mustCompact(t, l, withinRetained); st.Cleaned {
		t.Fatalf("a delete-only log was compacted: %+v", st)
	}
	if got := len(m.readKeyed(everything)); got != before {
		t.Fatalf("%d records, was %d", got, before)
	}
}

func TestRetentionOnlyWithDeletePolicy(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	cfg.RetentionMs = 1
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	m := newKeyedLog(t, l)
	fillKeyed(m, testTs0)
	if n, err := l.ApplyRetention(time.UnixMilli(farFuture)); err != nil || n != 0 {
		t.Fatalf("retention on a compact-only log deleted %d segments (%v)", n, err)
	}
	mustCompact(t, l, withinRetained)
	cfg.Delete = true // compact,delete
	l.SetConfig(cfg)
	if n, err := l.ApplyRetention(time.UnixMilli(farFuture)); err != nil || n == 0 {
		t.Fatalf("retention on a compact,delete log: %d, %v", n, err)
	}
	// The compacted segments' files, opened under temporary names, are gone too.
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if n := len(filesWithSuffix(t, dir, suffix)); n != len(segmentBases(l)) {
			t.Fatalf("%d %s files for %d segments", n, suffix, len(segmentBases(l)))
		}
	}
}

func TestCompactedLogRollsAtMaxCompactionLag(t *testing.T) {
	cfg := compactConfig()
	cfg.SegmentBytes = bigSegment
	cfg.MaxCompactionLagMs = 60_000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	m := newKeyedLog(t, l)
	m.append(testTs0, put("a", "1"))
	age := func(d time.Duration) {
		l.mu.Lock()
		l.activeLocked().rollTime = time.Now().Add(-d)
		l.mu.Unlock()
	}
	age(30 * time.Second)
	m.append(testTs0, put("a", "2"))
	if n := len(segmentBases(l)); n != 1 {
		t.Fatalf("%d segments: rolled before max.compaction.lag.ms", n)
	}
	age(61 * time.Second)
	m.append(testTs0, put("a", "3"))
	if n := len(segmentBases(l)); n != 2 {
		t.Fatalf("%d segments: the active segment of a compacted log was not rolled at max.compaction.lag.ms", n)
	}
}

// TestReadSkipsOffsetsMissingBetweenSegments reads at offsets that no batch
// holds, at the end of a segment: Read must go on to the next segment.
func TestReadSkipsOffsetsMissingBetweenSegments(t *testing.T) {
	dir := t.TempDir()
	write := func(base int64, n int) {
		b := makeBatch(base, n, testTs0)
		record.SetBaseOffset(b, base)
		if err := os.WriteFile(segmentPath(dir, base, logSuffix), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 5)  // offsets 0..4; 5..9 were compacted away
	write(10, 5) // the active segment
	l := mustOpen(t, dir, compactConfig())
	defer l.Close()
	for off := int64(5); off < 10; off++ {
		s, err := l.Read(off, 1)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		b, _ := s.Bytes()
		s.Release()
		recs := decodeAll(t, b)
		if len(recs) == 0 || recs[0].offset != 10 {
			t.Fatalf("Read(%d) returned %v, want the batch at 10", off, recs)
		}
	}
}

// TestReadContinuesIntoMergedSegment: a Read that finished a segment just as
// compaction merged it with its neighbours continues in the merged segment
// from the offset it had reached, rather than skipping past the group.
func TestReadContinuesIntoMergedSegment(t *testing.T) {
	cfg := compactConfig()
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	m := newKeyedLog(t, l)
	fillKeyed(m, testTs0)
	m.append(afterWorkload, put(key(0), "x"))
	v, _, err := l.viewContinuing(nil, 0) // the first segment, as a Read holds it
	if err != nil {
		t.Fatal(err)
	}
	defer v.release()
	cfg.SegmentBytes = bigSegment
	l.SetConfig(cfg)
	mustCompact(t, l, withinRetained)
	next, ok, err := l.viewContinuing(v.seg, v.next)
	if !ok || err != nil {
		t.Fatal("no segment to continue in", err)
	}
	defer next.release()
	if next.seg.base != 0 || next.next != activeBase(l) {
		t.Fatalf("continued in segment [%d, %d), want the merged [0, %d)", next.seg.base, next.next, activeBase(l))
	}
}
