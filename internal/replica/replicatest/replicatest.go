// Package replicatest is the conformance suite of replica.Log: what every
// implementation must do, the single-node replica.Local and the Raft log
// replica.RaftLog. An implementation's test calls Run with a function that
// opens its log in a directory, or RunReplicated for a log whose followers
// its replication writes.
//
// A leader epoch changes when leadership does. Local takes the epochs the
// suite gives AppendAt, as a follower takes its leader's; a Raft log's
// epochs are its group's terms, and AppendAt and TruncateTo are Raft's
// own business, refused to callers. So for a replicated log the suite
// moves to a later epoch through the harness's Lead (a leader change) and
// checks everything it checks of Local's epochs against the epochs that
// gave; what it checks of AppendAt and TruncateTo themselves (and of a cut
// surviving a crash) it checks of Local only, and of a replicated log that
// both are refused. Raft's own truncation of a divergent suffix is
// internal/replica's simulation tests' business.
//
// A crash is simulated by copying the directory of a live log, after the
// data in question was committed, and opening the copy: what a killed
// process leaves (no clean shutdown, nothing synced beyond what the log
// synced itself, since the copy reads the page cache). Power loss, where
// unsynced writes vanish too, is e2e/reliability's business.
package replicatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Opener opens the log in dir, creating it if it is missing; the suite
// closes what it opens.
type Opener func(t *testing.T, dir string) replica.Log

// Lead makes the replica of l lead at a later epoch than any in its log
// (for a Raft log: closes it, and reopens its directory, where its group
// elects it in a later term) and returns the log to use from then on.
type Lead func(t *testing.T, l replica.Log) replica.Log

// Run runs every conformance test against logs open opens, which lead
// alone and take AppendAt and TruncateTo (Local).
func Run(t *testing.T, open Opener) { run(t, suite{open: open}) }

// RunReplicated runs the conformance tests against logs open opens whose
// followers their replication writes: lead moves one to a later epoch.
func RunReplicated(t *testing.T, open Opener, lead Lead) { run(t, suite{open: open, lead: lead}) }

func run(t *testing.T, s suite) {
	t.Run("AppendAssignsOffsetsAndStampsTheEpoch", s.appendAssignsOffsets)
	t.Run("CommitWaits", s.commitWaits)
	t.Run("ReadIsBoundedByTheHighWatermark", s.readBounded)
	t.Run("AppendAt", s.appendAt)
	t.Run("TruncateTo", s.truncateTo)
	t.Run("EpochsFollowTheStart", s.epochsFollowTheStart)
	t.Run("CrashAndReopen", s.crashAndReopen)
}

type suite struct {
	open Opener
	lead Lead // nil: epochs are set with AppendAt
}

// batch builds a batch of n records with the values value(first..).
func batch(first int64, n int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{TimestampDelta: int64(i), Value: value(first + int64(i))}
	}
	return record.NewBatch(time.Now().UnixMilli(), recs)
}

// batchAt is batch with its base offset set, for AppendAt.
func batchAt(first int64, n int) []byte {
	b := batch(first, n)
	record.SetBaseOffset(b, first)
	return b
}

func value(off int64) []byte { return fmt.Appendf(nil, "value-%d", off) }

// appendN appends count batches of n records and returns the end offset.
func appendN(t *testing.T, l replica.Log, count, n int) int64 {
	t.Helper()
	for range count {
		end := l.EndOffset()
		a, err := l.Append(batch(end, n), replica.AppendOptions{})
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if a.BaseOffset != end || a.LastOffset != end+int64(n)-1 {
			t.Fatalf("Append at end %d of %d records landed at [%d, %d]", end, n, a.BaseOffset, a.LastOffset)
		}
	}
	return l.EndOffset()
}

func commitAll(t *testing.T, l replica.Log) {
	t.Helper()
	if err := l.Commit(l.EndOffset()).Wait(context.Background()); err != nil {
		t.Fatalf("commit of everything: %v", err)
	}
}

// readBatch is one batch read back.
type readBatch struct {
	base, last int64
	epoch      int32
	values     [][]byte
}

// readAll reads [from, HighWatermark) and returns its batches.
func readAll(t *testing.T, l replica.Log, from int64) []readBatch {
	t.Helper()
	var out []readBatch
	for next := from; next < l.HighWatermark(); {
		s, err := l.Read(next, 1<<10)
		if err != nil {
			t.Fatalf("Read(%d): %v", next, err)
		}
		batches := decode(t, s)
		if len(batches) == 0 {
			t.Fatalf("Read(%d) returned nothing below the high watermark %d", next, l.HighWatermark())
		}
		out = append(out, batches...)
		next = batches[len(batches)-1].last + 1
	}
	return out
}

// decode releases s and returns its batches, each verified.
func decode(t *testing.T, s *replica.Slice) []readBatch {
	t.Helper()
	b, err := s.Bytes()
	s.Release()
	if err != nil {
		t.Fatalf("Slice.Bytes: %v", err)
	}
	var out []readBatch
	for len(b) > 0 {
		h, err := record.Verify(b)
		if err != nil {
			t.Fatalf("a read returned a bad batch: %v", err)
		}
		recs, err := record.Records(b[:h.Size()])
		if err != nil {
			t.Fatal(err)
		}
		rb := readBatch{base: h.BaseOffset, last: h.LastOffset(), epoch: h.PartitionLeaderEpoch}
		for _, r := range recs {
			rb.values = append(rb.values, r.Value)
		}
		out = append(out, rb)
		b = b[h.Size():]
	}
	return out
}

// checkContents checks that every record read from the start holds
// value(offset), with no offset missing, and that every batch carries the
// epoch EpochAt gives for it.
func checkContents(t *testing.T, l replica.Log) {
	t.Helper()
	next := l.StartOffset()
	for _, b := range readAll(t, l, l.StartOffset()) {
		if b.base != next {
			t.Fatalf("batch at %d, want %d", b.base, next)
		}
		for i, v := range b.values {
			if off := b.base + int64(i); !bytes.Equal(v, value(off)) {
				t.Fatalf("offset %d holds %q, want %q", off, v, value(off))
			}
		}
		if e, err := l.EpochAt(b.base); err != nil || e != b.epoch {
			t.Fatalf("batch at %d carries epoch %d, EpochAt says %d (%v)", b.base, b.epoch, e, err)
		}
		next = b.last + 1
	}
	if next != l.HighWatermark() {
		t.Fatalf("read up to %d, the high watermark is %d", next, l.HighWatermark())
	}
}

func (s suite) openT(t *testing.T, dir string) replica.Log {
	l := s.open(t, dir)
	t.Cleanup(func() { l.Close() })
	return l
}

func (s suite) appendAssignsOffsets(t *testing.T) {
	l := s.openT(t, t.TempDir())
	if l.StartOffset() != 0 || l.EndOffset() != 0 || l.HighWatermark() != 0 {
		t.Fatalf("a new log spans [%d, %d), high watermark %d", l.StartOffset(), l.EndOffset(), l.HighWatermark())
	}
	end := appendN(t, l, 5, 3)
	two := append(batch(end, 1), batch(end+1, 2)...)
	a, err := l.Append(two, replica.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.BaseOffset != end || a.LastOffset != end+2 || l.EndOffset() != end+3 {
		t.Fatalf("two batches in one append landed at [%d, %d], end %d", a.BaseOffset, a.LastOffset, l.EndOffset())
	}
	if hw := l.HighWatermark(); hw > l.EndOffset() {
		t.Fatalf("high watermark %d above the end %d", hw, l.EndOffset())
	}
	commitAll(t, l)
	if l.HighWatermark() != l.EndOffset() {
		t.Fatalf("everything committed, yet the high watermark %d is below the end %d", l.HighWatermark(), l.EndOffset())
	}
	checkContents(t, l)
	// Its leader never changed: every batch carries the first one's epoch,
	// 0 for a single node's log, which the index then needs no entry for.
	batches := readAll(t, l, 0)
	first := batches[0].epoch
	if s.lead == nil && first != 0 {
		t.Fatalf("batch at 0 of a log that never left epoch 0 carries epoch %d", first)
	}
	for _, b := range batches {
		if b.epoch != first {
			t.Fatalf("batch at %d carries epoch %d, the log's first %d, and its leader never changed", b.base, b.epoch, first)
		}
	}
	var want []replica.EpochStart
	if first != 0 {
		want = []replica.EpochStart{{Epoch: first, StartOffset: 0}}
	}
	if e := l.Epochs(); !slices.Equal(e, want) {
		t.Fatalf("epoch index %v of a log that stayed in epoch %d, want %v", e, first, want)
	}
}

func (s suite) commitWaits(t *testing.T) {
	ctx := context.Background()
	l := s.open(t, t.TempDir())
	a, err := l.Append(batch(0, 2), replica.AppendOptions{AckCommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Ack.Wait(ctx); err != nil {
		t.Fatalf("the acknowledgement of an acks=all append: %v", err)
	}
	b, err := l.Append(batch(2, 1), replica.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit.Wait(ctx); err != nil {
		t.Fatalf("the Commit of an acks=1 append: %v", err)
	}
	if err := (replica.Commit{}).Wait(ctx); err != nil {
		t.Fatalf("the zero Commit: %v", err)
	}
	if err := l.AckFor(true, a.LastOffset+1).Wait(ctx); err != nil {
		t.Fatalf("AckFor of committed offsets: %v", err)
	}
	end := appendN(t, l, 3, 1)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Commit(end).Wait(cancelled); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait with a cancelled context: %v, want nil or context.Canceled", err)
	}
	pending := l.Commit(end)
	if err := l.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := pending.Wait(ctx); err != nil {
		t.Fatalf("a wait after Sync: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, appendErr := l.Append(batch(end, 1), replica.AppendOptions{})
	for name, err := range map[string]error{
		"Append": appendErr, "Sync": l.Sync(), "Commit.Wait": l.Commit(end).Wait(ctx),
	} {
		if !errors.Is(err, replica.ErrClosed) {
			t.Errorf("%s on a closed log: %v, want ErrClosed", name, err)
		}
	}
}

func (s suite) readBounded(t *testing.T) {
	l := s.openT(t, t.TempDir())
	end := appendN(t, l, 10, 2)
	commitAll(t, l)
	hw := l.HighWatermark()
	sl, err := l.Read(hw, 1<<20)
	if err != nil {
		t.Fatalf("Read at the high watermark: %v", err)
	}
	if got := decode(t, sl); len(got) != 0 {
		t.Fatalf("Read at the high watermark returned %d batches", len(got))
	}
	for _, off := range []int64{-1, hw + 1} {
		if _, err := l.Read(off, 1<<20); !errors.Is(err, replica.ErrOffsetOutOfRange) {
			t.Errorf("Read(%d) with the log at [0, %d): %v, want ErrOffsetOutOfRange", off, hw, err)
		}
	}
	// A read starts with the batch holding the offset asked for.
	if got := decode(t, mustRead(t, l, 5)); len(got) == 0 || got[0].base != 4 {
		t.Fatalf("Read(5) starts at %v, want the batch at 4", got)
	}
	for _, limit := range []int64{0, 3, 4, 11, end, end + 5} {
		sl, err := l.ReadBelow(0, 1<<20, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range decode(t, sl) {
			if b.base >= limit {
				t.Errorf("ReadBelow(limit %d) returned the batch at %d", limit, b.base)
			}
		}
	}
}

func mustRead(t *testing.T, l replica.Log, off int64) *replica.Slice {
	t.Helper()
	sl, err := l.Read(off, 1<<20)
	if err != nil {
		t.Fatalf("Read(%d): %v", off, err)
	}
	return sl
}

func (s suite) appendAt(t *testing.T) {
	l := s.openT(t, t.TempDir())
	end := appendN(t, l, 2, 2)
	if s.lead != nil {
		s.followerAPIRefused(t, l)
		return
	}
	if _, err := l.AppendAt(batchAt(end+1, 1), 2); !errors.Is(err, replica.ErrOffsetMismatch) {
		t.Errorf("AppendAt past the end: %v, want ErrOffsetMismatch", err)
	}
	if _, err := l.AppendAt(batchAt(end-1, 1), 2); !errors.Is(err, replica.ErrOffsetMismatch) {
		t.Errorf("AppendAt below the end: %v, want ErrOffsetMismatch", err)
	}
	damaged := batchAt(end, 1)
	damaged[len(damaged)-1] ^= 0xff
	if _, err := l.AppendAt(damaged, 2); err == nil {
		t.Errorf("AppendAt took a batch that fails its CRC")
	}
	a, err := l.AppendAt(append(batchAt(end, 2), batchAt(end+2, 1)...), 2)
	if err != nil {
		t.Fatal(err)
	}
	if a.BaseOffset != end || a.LastOffset != end+2 || l.EndOffset() != end+3 {
		t.Fatalf("AppendAt landed at [%d, %d], end %d", a.BaseOffset, a.LastOffset, l.EndOffset())
	}
	if err := a.Ack.Wait(context.Background()); err != nil {
		t.Fatalf("commit of an AppendAt: %v", err)
	}
	if _, err := l.AppendAt(batchAt(l.EndOffset(), 1), 1); !errors.Is(err, replica.ErrEpochRegressed) {
		t.Errorf("AppendAt at an older epoch: %v, want ErrEpochRegressed", err)
	}
	if _, err := l.AppendAt(batchAt(l.EndOffset(), 1), 5); err != nil {
		t.Fatal(err)
	}
	next := appendN(t, l, 1, 1) - 1
	commitAll(t, l)
	want := []replica.EpochStart{{Epoch: 2, StartOffset: end}, {Epoch: 5, StartOffset: end + 3}}
	if got := l.Epochs(); !slices.Equal(got, want) {
		t.Fatalf("epoch index %v, want %v", got, want)
	}
	if e, err := l.EpochAt(next); err != nil || e < 5 {
		t.Fatalf("an append after AppendAt at epoch 5 carries epoch %d (%v)", e, err)
	}
	checkContents(t, l)
}

// followerAPIRefused checks that a replicated log refuses AppendAt and
// TruncateTo, leaving itself as it was.
func (s suite) followerAPIRefused(t *testing.T, l replica.Log) {
	t.Helper()
	end := l.EndOffset()
	if _, err := l.AppendAt(batchAt(end, 1), 100); !errors.Is(err, replica.ErrReplicated) {
		t.Errorf("AppendAt on a replicated log: %v, want ErrReplicated", err)
	}
	if err := l.TruncateTo(0); !errors.Is(err, replica.ErrReplicated) {
		t.Errorf("TruncateTo on a replicated log: %v, want ErrReplicated", err)
	}
	if l.EndOffset() != end {
		t.Fatalf("a refused call moved the end from %d to %d", end, l.EndOffset())
	}
	commitAll(t, l)
	checkContents(t, l)
}

// truncatable builds a log of three epochs, two batches of two records in
// each: [0,1] [2,3] in the first, [4,5] [6,7] in the second, [8,9]
// [10,11] in the third, and returns the log and the epochs. For Local
// they are 0, 3 and 5, set with AppendAt; for a replicated log, whatever
// its leader changes give.
func (s suite) truncatable(t *testing.T, l replica.Log) (replica.Log, [3]int32) {
	t.Helper()
	appendN(t, l, 2, 2)
	epochs := [3]int32{0, 3, 5}
	for i := 1; i < 3; i++ {
		if s.lead != nil {
			commitAll(t, l) // what a leader never committed, a leader change may lose
			l = s.lead(t, l)
			appendN(t, l, 2, 2)
			epochs[i] = mustEpochAt(t, l, l.EndOffset()-1)
			continue
		}
		for range 2 {
			if _, err := l.AppendAt(batchAt(l.EndOffset(), 2), epochs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	commitAll(t, l)
	epochs[0] = mustEpochAt(t, l, 0)
	if !(epochs[0] < epochs[1] && epochs[1] < epochs[2]) {
		t.Fatalf("epochs %v after two leader changes", epochs)
	}
	return l, epochs
}

func mustEpochAt(t *testing.T, l replica.Log, off int64) int32 {
	t.Helper()
	e, err := l.EpochAt(off)
	if err != nil {
		t.Fatalf("EpochAt(%d): %v", off, err)
	}
	return e
}

func (s suite) truncateTo(t *testing.T) {
	ctx := context.Background()
	if s.lead != nil {
		l := s.openT(t, t.TempDir())
		appendN(t, l, 2, 2)
		s.followerAPIRefused(t, l)
		return
	}
	l := s.openT(t, t.TempDir())
	l, _ = s.truncatable(t, l)
	if err := l.TruncateTo(7); !errors.Is(err, replica.ErrOffsetMismatch) {
		t.Errorf("TruncateTo inside a batch: %v, want ErrOffsetMismatch", err)
	}
	if err := l.TruncateTo(13); !errors.Is(err, replica.ErrOffsetOutOfRange) {
		t.Errorf("TruncateTo past the end: %v, want ErrOffsetOutOfRange", err)
	}
	cut := l.Commit(12)
	if err := l.TruncateTo(8); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 8 || l.HighWatermark() > 8 {
		t.Fatalf("after TruncateTo(8): end %d, high watermark %d", l.EndOffset(), l.HighWatermark())
	}
	want := []replica.EpochStart{{Epoch: 3, StartOffset: 4}}
	if got := l.Epochs(); !slices.Equal(got, want) {
		t.Fatalf("epoch index %v after the cut, want %v", got, want)
	}
	if _, err := l.EpochAt(8); !errors.Is(err, replica.ErrOffsetOutOfRange) {
		t.Errorf("EpochAt of a cut offset: %v, want ErrOffsetOutOfRange", err)
	}
	// The follower takes the new leader's batches where the cut was.
	if _, err := l.AppendAt(append(batchAt(8, 2), batchAt(10, 3)...), 4); err != nil {
		t.Fatal(err)
	}
	commitAll(t, l)
	if err := cut.Wait(ctx); !errors.Is(err, replica.ErrTruncated) {
		t.Errorf("a commit of cut offsets, filled again since: %v, want ErrTruncated", err)
	}
	if err := l.Commit(8).Wait(ctx); err != nil {
		t.Errorf("a commit of offsets below the cut: %v", err)
	}
	checkContents(t, l)
	if err := l.TruncateTo(0); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 0 || len(l.Epochs()) != 0 {
		t.Fatalf("after TruncateTo(0): end %d, epochs %v", l.EndOffset(), l.Epochs())
	}
	appendN(t, l, 2, 1)
	commitAll(t, l)
	checkContents(t, l)
}

// epochsFollowTheStart: once DeleteBefore moved the start, every offset
// left still has its epoch (Raft's Term(i) from FirstIndex on).
func (s suite) epochsFollowTheStart(t *testing.T) {
	l, epochs := s.truncatable(t, s.open(t, t.TempDir()))
	t.Cleanup(func() { l.Close() })
	if _, err := l.DeleteBefore(6); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 6 {
		t.Fatalf("start %d after DeleteBefore(6)", l.StartOffset())
	}
	for off, want := range map[int64]int32{6: epochs[1], 7: epochs[1], 8: epochs[2], 11: epochs[2]} {
		if got, err := l.EpochAt(off); err != nil || got != want {
			t.Errorf("EpochAt(%d) = %d, %v; want %d", off, got, err, want)
		}
	}
	if _, err := l.EpochAt(5); !errors.Is(err, replica.ErrOffsetOutOfRange) {
		t.Errorf("EpochAt below the start: %v, want ErrOffsetOutOfRange", err)
	}
}

// crashAndReopen: committed data, its epochs and (on a log with the
// follower API) a cut survive a crash (and a clean close) unchanged.
func (s suite) crashAndReopen(t *testing.T) {
	l, _ := s.truncatable(t, s.open(t, t.TempDir()))
	if s.lead == nil {
		if err := l.TruncateTo(6); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAt(batchAt(6, 3), 4); err != nil {
			t.Fatal(err)
		}
	} else {
		commitAll(t, l)
		l = s.lead(t, l)
	}
	dir := l.Dir()
	appendN(t, l, 3, 2)
	commitAll(t, l)
	end, epochs, contents := l.EndOffset(), l.Epochs(), readAll(t, l, 0)

	crashed := filepath.Join(t.TempDir(), "crashed")
	copyDir(t, l.Dir(), crashed)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]string{"after a crash": crashed, "after a clean close": dir} {
		r := s.open(t, d)
		if r.EndOffset() != end {
			t.Errorf("%s: end %d, want %d", name, r.EndOffset(), end)
		}
		if got := r.Epochs(); !slices.Equal(got, epochs) {
			t.Errorf("%s: epoch index %v, want %v", name, got, epochs)
		}
		commitAll(t, r) // a replicated log may need its group back first
		if got := readAll(t, r, 0); !slices.EqualFunc(got, contents, sameBatch) {
			t.Errorf("%s: the log reads back differently", name)
		}
		checkContents(t, r)
		if _, err := r.Append(batch(end, 1), replica.AppendOptions{}); err != nil {
			t.Errorf("%s: append: %v", name, err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("%s: close: %v", name, err)
		}
	}
}

func sameBatch(a, b readBatch) bool {
	return a.base == b.base && a.last == b.last && a.epoch == b.epoch &&
		slices.EqualFunc(a.values, b.values, bytes.Equal)
}

// copyDir copies the regular files of the live directory from into to.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", from, err)
	}
}
