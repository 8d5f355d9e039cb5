package seglog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

func TestIndexRebuildAfterDeletingIndexFiles(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	end := appendBatches(t, l, 80, 3, 10_000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	indexes, _ := filepath.Glob(filepath.Join(dir, "*index"))
	want := map[string][]byte{}
	for _, p := range indexes {
		b, _ := os.ReadFile(p)
		want[p] = b
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if len(want) < 4 {
		t.Fatalf("only %d index files", len(want))
	}

	l = mustOpen(t, dir, smallConfig())
	if got := readAll(t, l, 700); int64(len(got)) != end {
		t.Fatalf("read %d records, want %d", len(got), end)
	}
	if off, ts, ok, err := l.OffsetForTime(10_000 + 100); err != nil || !ok || off != 100 || ts != 10_100 {
		t.Fatalf("OffsetForTime after rebuild: %d %d %v %v", off, ts, ok, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for p, b := range want {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("index not rebuilt: %v", err)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("%s rebuilt differently (%d bytes, was %d)", p, len(got), len(b))
		}
	}
}

func TestIndexLongerThanLogIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	end := appendBatches(t, l, 80, 3, 0)
	l.Close()
	// An index entry pointing past the end of its log, as after a log file
	// was truncated behind the index's back.
	idx := segmentPath(dir, 0, indexSuffix)
	f, _ := os.OpenFile(idx, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{0, 0, 1, 0, 0, 1, 0, 0})
	f.Close()
	// And a time index that is not a whole number of entries.
	os.WriteFile(segmentPath(dir, 0, timeIndexSuffix), []byte{1, 2, 3}, 0o644)

	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	if got := readAll(t, l, 300); int64(len(got)) != end {
		t.Fatalf("read %d records, want %d", len(got), end)
	}
	if n := fileSize(t, idx); n%offsetEntrySize != 0 || n == 0 {
		t.Fatalf("index has %d bytes after rebuild", n)
	}
}

// tornTailCases damage the last batch of the last segment, which ends at
// dataEnd, the ways a crash can: cut mid-batch, cut mid-batch with zeros
// after (file size persisted, data not), only a few header bytes, a whole
// batch of zeros, and a complete batch with a bad CRC that nothing valid
// follows.
var tornTailCases = []struct {
	name   string
	damage func(t *testing.T, path string, lastPos, dataEnd int64)
}{
	{"cut mid-batch", func(t *testing.T, path string, lastPos, _ int64) {
		os.Truncate(path, lastPos+40)
	}},
	{"cut and zero-filled", func(t *testing.T, path string, lastPos, _ int64) {
		os.Truncate(path, lastPos+70)
		appendBytes(t, path, make([]byte, 500))
	}},
	{"short header", func(t *testing.T, path string, lastPos, _ int64) {
		os.Truncate(path, lastPos+5)
	}},
	{"all zeros", func(t *testing.T, path string, lastPos, dataEnd int64) {
		os.Truncate(path, lastPos)
		appendBytes(t, path, make([]byte, dataEnd-lastPos))
	}},
	{"complete batch with bad crc", func(t *testing.T, path string, _, dataEnd int64) {
		os.Truncate(path, dataEnd)
		flipByte(t, path, dataEnd-3)
	}},
}

// zeroTail extends the file with zeros to size, as the preallocated space
// past a torn write reads after a crash.
func zeroTail(t *testing.T, path string, size int64) {
	t.Helper()
	if n := size - fileSize(t, path); n > 0 {
		appendBytes(t, path, make([]byte, n))
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestTornTailIsTruncated damages the tail each way tornTailCases do,
// with the file ending where the damage leaves it and with the active
// segment's preallocated zeros after it.
func TestTornTailIsTruncated(t *testing.T) {
	for _, tc := range tornTailCases {
		for _, preallocated := range []bool{false, true} {
			name := tc.name
			if preallocated {
				name += ", preallocated space after"
			}
			t.Run(name, func(t *testing.T) { testTornTail(t, tc.damage, preallocated) })
		}
	}
}

func testTornTail(t *testing.T, damage func(t *testing.T, path string, lastPos, dataEnd int64), preallocated bool) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	appendBatches(t, l, 30, 3, 0)
	l.crash()
	files := segmentFiles(t, dir)
	last := files[len(files)-1]
	positions, dataEnd := batchPositions(t, last), segmentDataEnd(t, last)
	lastPos := positions[len(positions)-1]
	s, _ := os.ReadFile(last)
	h, _ := record.ParseHeader(s[lastPos:])
	allocated := fileSize(t, last)
	if allocated <= dataEnd {
		t.Fatalf("active segment has no preallocated space: %d bytes of data, file of %d", dataEnd, allocated)
	}
	damage(t, last, lastPos, dataEnd)
	if preallocated {
		zeroTail(t, last, allocated)
	}

	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	if got := fileSize(t, last); got != lastPos {
		t.Fatalf("segment is %d bytes after recovery, want %d", got, lastPos)
	}
	if l.EndOffset() != h.BaseOffset {
		t.Fatalf("end offset %d, want %d", l.EndOffset(), h.BaseOffset)
	}
	res, err := l.Append(makeBatch(h.BaseOffset, 2, 0), AppendOptions{Durable: true})
	if err != nil || res.BaseOffset != h.BaseOffset {
		t.Fatalf("append after recovery: %+v %v", res, err)
	}
	if got := readAll(t, l, 500); int64(len(got)) != h.BaseOffset+2 {
		t.Fatalf("read %d records", len(got))
	}
}

func TestFlippedByteMidSegmentIsCorruption(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20 // one segment
	l := mustOpen(t, dir, cfg)
	appendBatches(t, l, 30, 3, 0)
	l.crash()
	path := segmentPath(dir, 0, logSuffix)
	positions := batchPositions(t, path)
	bad := positions[12]
	flipByte(t, path, bad+record.HeaderSize+4) // inside the records: only the CRC notices
	before, _ := os.ReadFile(path)

	_, err := Open(dir, cfg, testLogger(t))
	wantCorruption(t, err, path, bad)
	if !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("error does not wrap record.ErrCorrupt: %v", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("Open changed the corrupt segment")
	}
	// Still refused on the next attempt: nothing was "repaired" silently.
	_, err = Open(dir, cfg, testLogger(t))
	wantCorruption(t, err, path, bad)
}

// TestLostPageBeforeALaterWriteIsATornTail: a power cut can leave a later
// page of unsynced batches on disk while an earlier page never got there
// (it reads as zeros). Nothing from the lost page on was covered by a
// completed fsync, so recovery cuts the log there, valid later batch or
// not, instead of taking the log offline as it does for a flipped bit.
func TestLostPageBeforeALaterWriteIsATornTail(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, dir, cfg)
	appendBatches(t, l, 200, 3, 0) // about 20 KiB: several pages
	l.crash()
	path := segmentPath(dir, 0, logSuffix)
	positions := batchPositions(t, path)
	const lost = 2 * pageSize // the third page never reached the disk
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, pageSize), lost); err != nil {
		t.Fatal(err)
	}
	f.Close()
	torn := -1 // the first batch that reaches into the lost page
	for i := range positions {
		if i+1 < len(positions) && positions[i+1] > lost {
			torn = i
			break
		}
	}
	if positions[len(positions)-1] < lost+pageSize {
		t.Fatalf("no batch starts after the lost page (last at %d)", positions[len(positions)-1])
	}

	l, err = Open(dir, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("Open after a lost page: %v (want the tail cut, not corruption)", err)
	}
	defer l.Close()
	if want := int64(torn) * 3; l.EndOffset() != want {
		t.Fatalf("end offset %d, want %d (cut at the batch reaching into the lost page)", l.EndOffset(), want)
	}
	if size := fileSize(t, path); size != positions[torn] {
		t.Fatalf("segment is %d bytes, want it cut at %d", size, positions[torn])
	}
}

// TestLostPageHoldingTheSyncedEndIsATornTail: the page the last fsync's
// data ended in was written again by later appends, and that write never
// reached the disk while the next page's did. The page reads as at the
// fsync: the data, then zeros up to its end where the next batch started.
// That is a torn tail too, not damage.
func TestLostPageHoldingTheSyncedEndIsATornTail(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, dir, cfg)
	appendBatches(t, l, 10, 3, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := l.EndOffset()
	appendBatches(t, l, 100, 3, 0) // several pages more
	l.crash()
	path := segmentPath(dir, 0, logSuffix)
	cut := batchPositions(t, path)[10] // where the fsynced data ends
	if cut%pageSize < 100 || cut%pageSize > pageSize-100 {
		t.Fatalf("the fsynced data ends at %d, too near a page boundary for the test", cut)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	pageEnd := (cut/pageSize + 1) * pageSize
	if _, err := f.WriteAt(make([]byte, pageEnd-cut), cut); err != nil {
		t.Fatal(err)
	}
	f.Close()

	l, err = Open(dir, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("Open after losing the page the fsynced data ends in: %v (want the tail cut, not corruption)", err)
	}
	defer l.Close()
	if l.EndOffset() != synced {
		t.Fatalf("end offset %d, want %d (cut where the fsynced data ends)", l.EndOffset(), synced)
	}
	if size := fileSize(t, path); size != cut {
		t.Fatalf("segment is %d bytes, want it cut at %d", size, cut)
	}
}

// TestFlippedBitBesideZeroValueIsCorruption: a batch may hold whole pages
// of zeros as content (a value of zeros). A flipped bit elsewhere in it
// must still fence the log, not pass for a page a crash lost.
func TestFlippedBitBesideZeroValueIsCorruption(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, dir, cfg)
	appendBatches(t, l, 3, 3, 0)
	zeros := record.NewBatch(0, []record.Record{{Key: []byte("k"), Value: make([]byte, 4*pageSize)}})
	if _, err := l.Append(zeros, AppendOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	appendBatches(t, l, 3, 3, 0) // valid batches after the damaged one
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.crash()
	path := segmentPath(dir, 0, logSuffix)
	bad := batchPositions(t, path)[3]
	flipBit(t, path, bad+record.HeaderSize+2) // in the record's length, before the zero value
	_, err := Open(dir, cfg, testLogger(t))
	wantCorruption(t, err, path, bad)
}

func TestFlippedLengthMidSegmentIsNotMistakenForTornTail(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, dir, cfg)
	appendBatches(t, l, 30, 3, 0)
	l.crash()
	path := segmentPath(dir, 0, logSuffix)
	bad := batchPositions(t, path)[10]
	flipByte(t, path, bad+8) // top byte of BatchLength: the batch "runs past EOF"
	size := fileSize(t, path)

	_, err := Open(dir, cfg, testLogger(t))
	wantCorruption(t, err, path, bad)
	if fileSize(t, path) != size {
		t.Fatal("segment was truncated")
	}
}

func TestFlippedByteInNonLastSegmentIsCorruption(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	appendBatches(t, l, 150, 3, 0)
	l.crash()
	files := segmentFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("%d segments", len(files))
	}
	path := files[1]
	positions, dataEnd := batchPositions(t, path), segmentDataEnd(t, path)
	bad := positions[len(positions)-1] // its last batch: nothing follows it in this file
	flipByte(t, path, dataEnd-2)
	sizes := map[string]int64{}
	for _, f := range files {
		sizes[f] = fileSize(t, f)
	}

	_, err := Open(dir, smallConfig(), testLogger(t))
	wantCorruption(t, err, path, bad)
	for _, f := range files {
		if fileSize(t, f) != sizes[f] {
			t.Fatalf("%s changed size", f)
		}
	}
}

func TestTornLookingBatchBelowRecoveryPointIsCorruption(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, dir, cfg)
	appendBatches(t, l, 10, 3, 0)
	l.lastCheckpoint = time.Time{}
	if err := l.Sync(); err != nil { // persists the recovery point 30
		t.Fatal(err)
	}
	l.crash()
	if rp, _, _ := readOffsetFile(dir, recoveryPointFile); rp != 30 {
		t.Fatalf("recovery point %d, want 30", rp)
	}
	path := segmentPath(dir, 0, logSuffix)
	positions, dataEnd := batchPositions(t, path), segmentDataEnd(t, path)
	flipByte(t, path, dataEnd-2) // the last batch was fsynced: not a torn write

	_, err := Open(dir, cfg, testLogger(t))
	wantCorruption(t, err, path, positions[len(positions)-1])
}

func TestCleanShutdownSkipsRescan(t *testing.T) {
	// Kafka trusts the segments after a clean shutdown and only rescans
	// past the recovery point after an unclean one; Wharf does the same, so
	// damage done while the log was cleanly closed goes unnoticed at Open.
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, dir, cfg)
	end := appendBatches(t, l, 20, 3, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := fileExists(filepath.Join(dir, cleanShutdownFile)); !ok {
		t.Fatal("no clean-shutdown marker after Close")
	}
	path := segmentPath(dir, 0, logSuffix)
	bad := batchPositions(t, path)[5]
	flipByte(t, path, bad+record.HeaderSize+3)

	l = mustOpen(t, dir, cfg) // no rescan, no error
	if l.EndOffset() != end {
		t.Fatalf("end %d, want %d", l.EndOffset(), end)
	}
	if ok, _ := fileExists(filepath.Join(dir, cleanShutdownFile)); ok {
		t.Fatal("Open left the clean-shutdown marker")
	}
	l.crash()
	// Without the marker Open verifies from the recovery point (the end of
	// the log at the clean Close, inside this one segment) and finds it.
	_, err := Open(dir, cfg, testLogger(t))
	wantCorruption(t, err, path, bad)
}

func TestUncleanOpenWithoutRecoveryPointVerifiesEverything(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	end := appendBatches(t, l, 60, 3, 0)
	l.Close()
	os.Remove(filepath.Join(dir, cleanShutdownFile))
	os.Remove(filepath.Join(dir, recoveryPointFile))
	flipByte(t, segmentFiles(t, dir)[0], 100)
	if _, err := Open(dir, smallConfig(), testLogger(t)); err == nil {
		t.Fatal("corruption in the first segment not found by a full scan")
	}
	flipByte(t, segmentFiles(t, dir)[0], 100) // repair
	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	if l.EndOffset() != end {
		t.Fatalf("end %d, want %d", l.EndOffset(), end)
	}
}

func TestRecoveryPointBeyondEndIsCorruption(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	appendBatches(t, l, 5, 3, 0)
	l.crash()
	writeOffsetFile(dir, recoveryPointFile, 1000, false)
	_, err := Open(dir, smallConfig(), testLogger(t))
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CorruptionError for missing fsynced data, got %v", err)
	}
}

func TestLeftoverEmptySegmentsAreRemoved(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	end := appendBatches(t, l, 150, 3, 0)
	l.Close()
	files := segmentFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("%d segments", len(files))
	}
	// Empty segment files in the middle of the log and at its end, with
	// base offsets inside other segments.
	first, _ := parseSegmentName(filepath.Base(files[0]), logSuffix)
	last, _ := parseSegmentName(filepath.Base(files[len(files)-1]), logSuffix)
	strays := []string{segmentPath(dir, first+1, logSuffix), segmentPath(dir, last+1, logSuffix)}
	for _, p := range strays {
		os.WriteFile(p, nil, 0o644)
	}

	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	for _, p := range strays {
		if ok, _ := fileExists(p); ok {
			t.Fatalf("empty leftover segment %s kept", p)
		}
	}
	if l.EndOffset() != end {
		t.Fatalf("end %d, want %d", l.EndOffset(), end)
	}
	if got := readAll(t, l, 1000); int64(len(got)) != end {
		t.Fatalf("read %d records", len(got))
	}
	appendBatches(t, l, 1, 1, 0)
}

func TestTornTailBeforeEmptyLastSegment(t *testing.T) {
	// A crash between a roll creating the next segment and... the closed
	// segment being torn cannot happen (a roll fsyncs it first), but a torn
	// segment followed by an empty one must still be treated as the tail.
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, dir, cfg)
	end := appendBatches(t, l, 10, 3, 0)
	l.crash()
	path := segmentPath(dir, 0, logSuffix)
	dataEnd := segmentDataEnd(t, path)
	os.Truncate(path, dataEnd-10)
	os.WriteFile(segmentPath(dir, end, logSuffix), nil, 0o644)

	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.EndOffset() != end-3 {
		t.Fatalf("end %d, want %d", l.EndOffset(), end-3)
	}
	if n := len(segmentFiles(t, dir)); n != 1 {
		t.Fatalf("%d segments, want the empty one after the gap removed", n)
	}
	appendBatches(t, l, 1, 1, 0)
}

func TestGarbageTailNeverPanics(t *testing.T) {
	seeds := [][]byte{
		{2},
		bytes.Repeat([]byte{0xff}, 100),
		append(make([]byte, 16), 2, 0, 0, 0, 0),
		makeBatch(0, 1, 0)[:50],
		makeBatch(0, 1, 0), // a stray valid batch with offset 0 (stale)
	}
	for i, garbage := range seeds {
		checkGarbageTail(t, t.TempDir(), garbage, i)
	}
}

func FuzzRecover(f *testing.F) {
	f.Add([]byte{2}, 0)
	f.Add(makeBatch(0, 2, 0), 30)
	f.Add(bytes.Repeat([]byte{2}, 200), 7)
	f.Fuzz(func(t *testing.T, garbage []byte, cut int) {
		checkGarbageTail(t, t.TempDir(), garbage, cut)
	})
}

// checkGarbageTail appends garbage to a log (after cutting up to cut bytes
// of its last batch) and checks that Open either recovers a readable
// prefix or reports corruption, never panics or loses the earlier batches.
func checkGarbageTail(t *testing.T, dir string, garbage []byte, cut int) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, dir, cfg)
	appendBatches(t, l, 6, 2, 0)
	l.crash()
	path := segmentPath(dir, 0, logSuffix)
	size := fileSize(t, path)
	if cut = cut % 40; cut < 0 {
		cut = -cut
	}
	os.Truncate(path, size-int64(cut))
	appendBytes(t, path, garbage)

	l, err := Open(dir, cfg, testLogger(t))
	if err != nil {
		var ce *CorruptionError
		if !errors.As(err, &ce) {
			t.Fatalf("Open: %v", err)
		}
		return
	}
	defer l.Close()
	want := int64(12)
	if cut > 0 {
		want = 10
	}
	if l.EndOffset() < want {
		t.Fatalf("recovered only %d offsets, want at least %d", l.EndOffset(), want)
	}
	readAllLoose(t, l)
}

// readAllLoose reads the whole log and checks only that it decodes.
func readAllLoose(t *testing.T, l *Log) {
	decodeAll(t, wholeLog(t, l))
}

// wholeLog is the bytes of every batch of l from its start offset.
func wholeLog(t *testing.T, l *Log) []byte {
	t.Helper()
	s, err := l.Read(l.StartOffset(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	b, err := s.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUncleanOpenTrustsSegmentsBelowRecoveryPoint(t *testing.T) {
	// Only segments from the one holding the recovery point are verified,
	// as in Kafka: a (hypothetical) flipped byte in an older segment's
	// records is not read at Open.
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	end := appendBatches(t, l, 150, 3, 0)
	l.lastCheckpoint = time.Time{}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	appendBatches(t, l, 2, 3, 0)
	l.crash()
	files := segmentFiles(t, dir)
	flipByte(t, files[0], record.HeaderSize+3)
	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	if l.EndOffset() != end+6 {
		t.Fatalf("end %d, want %d", l.EndOffset(), end+6)
	}
}

func TestSegmentsBelowPersistedStartAreRemovedAtOpen(t *testing.T) {
	// A crash between persisting a new start offset and unlinking the
	// segments below it.
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	end := appendBatches(t, l, 150, 3, 0)
	bases := segmentBases(l)
	l.crash()
	start := bases[2] + 1
	if err := writeOffsetFile(dir, startOffsetFile, start, true); err != nil {
		t.Fatal(err)
	}
	flipByte(t, segmentPath(dir, bases[0], logSuffix), 100) // deleted data is not verified
	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	if got := segmentBases(l); got[0] != bases[2] {
		t.Fatalf("segments %v", got)
	}
	if ok, _ := fileExists(segmentPath(dir, bases[1], logSuffix)); ok {
		t.Fatal("segment below the start offset kept")
	}
	if l.StartOffset() != start || l.EndOffset() != end {
		t.Fatalf("start %d end %d", l.StartOffset(), l.EndOffset())
	}
}
