package seglog

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// batchEpochs reads the log and returns the PartitionLeaderEpoch of every
// batch, by base offset.
func batchEpochs(t *testing.T, l *Log) map[int64]int32 {
	t.Helper()
	out := map[int64]int32{}
	for next := l.StartOffset(); next < l.EndOffset(); {
		s, err := l.Read(next, 1<<20)
		if err != nil {
			t.Fatalf("Read(%d): %v", next, err)
		}
		b, err := s.Bytes()
		s.Release()
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, err := record.Verify(b)
			if err != nil {
				t.Fatalf("batch at %d: %v", next, err)
			}
			out[h.BaseOffset] = h.PartitionLeaderEpoch
			next = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return out
}

// appendAtEpoch appends count one-record batches under epoch and returns
// the log end.
func appendAtEpoch(t *testing.T, l *Log, count int, epoch int32) int64 {
	t.Helper()
	for range count {
		first := l.EndOffset()
		if _, err := l.Append(makeBatch(first, 1, first), AppendOptions{LeaderEpoch: epoch}); err != nil {
			t.Fatalf("Append at epoch %d: %v", epoch, err)
		}
	}
	return l.EndOffset()
}

func wantEpochs(t *testing.T, l *Log, want []EpochStart) {
	t.Helper()
	if got := l.Epochs(); !slices.Equal(got, want) {
		t.Fatalf("epoch index %v, want %v", got, want)
	}
}

// Append stamps its leader epoch into every batch (a client's batch
// arrives with -1); the index starts an entry only where the epoch
// rises, and epoch 0 needs none, so a single node's log has no index file.
func TestAppendStampsLeaderEpoch(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	batch := makeBatch(0, 2, 1)
	if h, _ := record.ParseHeader(batch); h.PartitionLeaderEpoch != -1 {
		t.Fatalf("a built batch has epoch %d, want -1", h.PartitionLeaderEpoch)
	}
	if _, err := l.Append(batch, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	appendAtEpoch(t, l, 3, 0)
	wantEpochs(t, l, nil)
	if _, err := os.Stat(filepath.Join(dir, epochFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a log at epoch 0 has an epoch file: %v", err)
	}
	appendAtEpoch(t, l, 2, 4)
	appendAtEpoch(t, l, 2, 7)
	wantEpochs(t, l, []EpochStart{{4, 5}, {7, 7}})
	for off, epoch := range batchEpochs(t, l) {
		want := int32(0)
		switch {
		case off >= 7:
			want = 7
		case off >= 5:
			want = 4
		}
		if epoch != want {
			t.Errorf("batch at %d carries epoch %d, want %d", off, epoch, want)
		}
		if got, err := l.EpochAt(off); err != nil || got != want {
			t.Errorf("EpochAt(%d) = %d, %v; want %d", off, got, err, want)
		}
	}
	if l.LatestEpoch() != 7 {
		t.Errorf("LatestEpoch %d, want 7", l.LatestEpoch())
	}
	if _, err := l.EpochAt(l.EndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("EpochAt(end): %v, want ErrOffsetOutOfRange", err)
	}
	if _, err := l.Append(makeBatch(9, 1, 9), AppendOptions{LeaderEpoch: 6}); !errors.Is(err, ErrEpochRegressed) {
		t.Errorf("append at an older epoch: %v, want ErrEpochRegressed", err)
	}
}

// The index file is Kafka's leader-epoch-checkpoint and survives a clean
// close and reopen as it was.
func TestEpochIndexFileFormat(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	appendAtEpoch(t, l, 2, 0)
	appendAtEpoch(t, l, 1, 3)
	appendAtEpoch(t, l, 1, 5)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, epochFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := "0\n2\n3 2\n5 3\n"; string(b) != want {
		t.Fatalf("%s holds %q, want %q", epochFile, b, want)
	}
	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	wantEpochs(t, l, []EpochStart{{3, 2}, {5, 3}})
}

// After a crash the index keeps no entry past the end of the log (a torn
// batch's), and one lost with its file is rebuilt from the batches Open
// verifies.
func TestEpochIndexAfterCrash(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	appendAtEpoch(t, l, 3, 1)
	end := appendAtEpoch(t, l, 3, 2)
	seg := segmentFiles(t, dir)
	last := seg[len(seg)-1]
	positions := batchPositions(t, last)
	appendAtEpoch(t, l, 1, 9) // then torn off
	l.crash()
	if err := os.Truncate(last, positions[len(positions)-1]+int64(len(makeBatch(0, 1, 0)))+10); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, smallConfig())
	if l.EndOffset() != end {
		t.Fatalf("end %d after the torn tail, want %d", l.EndOffset(), end)
	}
	wantEpochs(t, l, []EpochStart{{1, 0}, {2, 3}})
	l.crash()

	if err := os.WriteFile(filepath.Join(dir, epochFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, smallConfig())
	wantEpochs(t, l, []EpochStart{{1, 0}, {2, 3}})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, epochFile))
	if err != nil || string(b) != "0\n2\n1 0\n2 3\n" {
		t.Fatalf("rebuilt file holds %q (%v)", b, err)
	}
}

// Moving the log start offset folds the entries below it into one at the
// start, as Kafka's truncateFromStart does.
func TestEpochIndexFollowsTheStart(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	appendAtEpoch(t, l, 3, 1)
	appendAtEpoch(t, l, 3, 2)
	appendAtEpoch(t, l, 3, 3)
	if _, err := l.DeleteBefore(4); err != nil {
		t.Fatal(err)
	}
	wantEpochs(t, l, []EpochStart{{2, 4}, {3, 6}})
	if got, _ := l.EpochAt(4); got != 2 {
		t.Errorf("EpochAt(4) = %d, want 2", got)
	}
}

// AppendAt keeps the offsets it is given and stamps the epoch; it refuses
// a gap, an overlap, an older epoch and a batch that fails its CRC.
func TestAppendAt(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	appendAtEpoch(t, l, 2, 1)

	at := func(base int64, n int) []byte {
		b := makeBatch(base, n, base)
		record.SetBaseOffset(b, base)
		return b
	}
	if _, err := l.AppendAt(at(3, 1), 2); !errors.Is(err, ErrOffsetMismatch) {
		t.Errorf("AppendAt past the end: %v, want ErrOffsetMismatch", err)
	}
	if _, err := l.AppendAt(at(1, 1), 2); !errors.Is(err, ErrOffsetMismatch) {
		t.Errorf("AppendAt below the end: %v, want ErrOffsetMismatch", err)
	}
	if _, err := l.AppendAt(append(at(2, 2), at(5, 1)...), 2); !errors.Is(err, ErrOffsetMismatch) {
		t.Errorf("AppendAt with a gap between its batches: %v, want ErrOffsetMismatch", err)
	}
	if _, err := l.AppendAt(at(2, 1), 0); !errors.Is(err, ErrEpochRegressed) {
		t.Errorf("AppendAt at an older epoch: %v, want ErrEpochRegressed", err)
	}
	bad := at(2, 1)
	bad[len(bad)-1] ^= 0xff
	if _, err := l.AppendAt(bad, 2); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("AppendAt of a damaged batch: %v, want record.ErrCorrupt", err)
	}
	res, err := l.AppendAt(append(at(2, 2), at(4, 3)...), 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 2 || res.LastOffset != 6 || l.EndOffset() != 7 {
		t.Fatalf("AppendAt landed at %+v, end %d", res, l.EndOffset())
	}
	wantEpochs(t, l, []EpochStart{{1, 0}, {2, 2}})
	readAll(t, l, 1<<20)
	if got := batchEpochs(t, l); got[2] != 2 || got[4] != 2 || got[0] != 1 {
		t.Errorf("batch epochs %v", got)
	}
}
