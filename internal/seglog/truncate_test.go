package seglog

import (
	"context"
	"errors"
	"io"
	"testing"
)

// TruncateTo cuts at any batch boundary: inside the active segment, inside
// a closed one (later segments go), at a segment's first batch; appends
// then continue at the cut with fresh offsets, and all of it survives a
// reopen, clean or not.
func TestTruncateTo(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(l *Log) int64 // the offset to cut at, given a log of 250 one-record batches
	}{
		{"active segment", func(l *Log) int64 { return l.EndOffset() - 3 }},
		{"closed segment", func(l *Log) int64 { return 17 }},
		{"segment start", func(l *Log) int64 { return l.segments[2].base }},
		{"log start", func(l *Log) int64 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, clean := range []bool{true, false} {
				dir := t.TempDir()
				l := mustOpen(t, dir, smallConfig())
				appendBatches(t, l, 250, 1, 0)
				if len(l.segments) < 4 {
					t.Fatalf("%d segments; the test wants several", len(l.segments))
				}
				cut := tc.cut(l)
				if err := l.TruncateTo(cut); err != nil {
					t.Fatalf("TruncateTo(%d): %v", cut, err)
				}
				if l.EndOffset() != cut {
					t.Fatalf("end %d after TruncateTo(%d)", l.EndOffset(), cut)
				}
				if got := readAll(t, l, 1<<20); int64(len(got)) != cut {
					t.Fatalf("%d records readable after the cut at %d", len(got), cut)
				}
				end := appendBatches(t, l, 5, 2, 0) // values follow the offsets again
				if clean {
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := l.waitDurableNow(end); err != nil {
						t.Fatal(err)
					}
					l.crash()
				}
				l = mustOpen(t, dir, smallConfig())
				if l.EndOffset() != end || int64(len(readAll(t, l, 1<<20))) != end {
					t.Fatalf("reopened (clean %v): end %d, want %d", clean, l.EndOffset(), end)
				}
				l.Close()
			}
		})
	}
}

func TestTruncateToRefuses(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	appendBatches(t, l, 4, 3, 0) // batches [0,2] [3,5] [6,8] [9,11]
	if err := l.TruncateTo(4); !errors.Is(err, ErrOffsetMismatch) {
		t.Errorf("TruncateTo inside a batch: %v, want ErrOffsetMismatch", err)
	}
	if err := l.TruncateTo(13); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("TruncateTo past the end: %v, want ErrOffsetOutOfRange", err)
	}
	if err := l.TruncateTo(12); err != nil || l.EndOffset() != 12 {
		t.Errorf("TruncateTo(end): %v, end %d", err, l.EndOffset())
	}
	if _, err := l.DeleteBefore(3); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(0); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("TruncateTo below the start: %v, want ErrOffsetOutOfRange", err)
	}
}

// The epoch index is cut with the log, and the recovery point too: a crash
// right after the cut must find neither the cut batches' epochs nor
// complain that fsynced data went missing.
func TestTruncateToCutsEpochsAndRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	appendAtEpoch(t, l, 10, 1)
	appendAtEpoch(t, l, 10, 2)
	appendAtEpoch(t, l, 10, 3)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil { // the recovery point is now the end, 30
		t.Fatal(err)
	}
	l = mustOpen(t, dir, smallConfig())
	if err := l.TruncateTo(15); err != nil {
		t.Fatal(err)
	}
	wantEpochs(t, l, []EpochStart{{1, 0}, {2, 10}})
	if l.LatestEpoch() != 2 {
		t.Fatalf("LatestEpoch %d after the cut, want 2", l.LatestEpoch())
	}
	appendAtEpoch(t, l, 2, 4)
	l.crash()
	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	if l.EndOffset() != 17 {
		t.Fatalf("end %d after the crash, want 17", l.EndOffset())
	}
	wantEpochs(t, l, []EpochStart{{1, 0}, {2, 10}, {4, 15}})
}

// A durability wait for offsets a TruncateTo cut fails with ErrTruncated,
// even once other batches fill those offsets again and are fsynced.
func TestTruncateToFailsWaitsForCutOffsets(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	appendBatches(t, l, 3, 1, 0)
	res, err := l.Append(makeBatch(3, 2, 3), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	end := appendBatches(t, l, 3, 1, 0)
	if err := l.waitDurableNow(end); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(context.Background(), res.LastOffset+1, res.Truncations); !errors.Is(err, ErrTruncated) {
		t.Errorf("wait for the cut batch: %v, want ErrTruncated", err)
	}
	before, err := l.Append(makeBatch(end, 1, end), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(context.Background(), 3, res.Truncations); err != nil {
		t.Errorf("wait for offsets below the cut: %v", err)
	}
	if err := l.WaitDurable(context.Background(), before.LastOffset+1, before.Truncations); err != nil {
		t.Errorf("wait for a batch written after the cut: %v", err)
	}
	if err := l.waitDurableNow(l.EndOffset() + 1); !errors.Is(err, ErrTruncated) {
		t.Errorf("wait for offsets never written: %v, want ErrTruncated", err)
	}
}

// A reader still holding a slice of cut bytes reads short, never the
// batches written after the cut.
func TestTruncateToLeavesOldSlicesShort(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	appendBatches(t, l, 4, 1, 0)
	s, err := l.Read(2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if err := l.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	appendBatches(t, l, 4, 1, 0)
	if _, err := s.Bytes(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading a slice of cut bytes: %v, want io.ErrUnexpectedEOF", err)
	}
}

// A durability wait returns its context's error once the context ends.
func TestWaitDurableStopsWithItsContext(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	end := appendBatches(t, l, 2, 1, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.WaitDurable(ctx, end, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("wait with a cancelled context: %v, want context.Canceled", err)
	}
	if err := l.WaitDurable(context.Background(), end, 0); err != nil {
		t.Errorf("wait after the cancelled one: %v", err)
	}
}

// ReadBelow drops the batches from limit on: across segments, and
// within a chunk longer than one block of headers (cutBlock).
func TestReadBelow(t *testing.T) {
	for _, c := range []struct {
		name           string
		cfg            Config
		batches, count int // count records each
		limits         []int64
	}{
		{"several segments", smallConfig(), 40, 2, []int64{0, 1, 2, 7, 30, 80, 1000}},
		{"one segment, several header blocks", DefaultConfig(), 2000, 3, []int64{1, 3, 1500, 2999, 3001, 5998, 6000, 6005}},
	} {
		l := mustOpen(t, t.TempDir(), c.cfg)
		appendBatches(t, l, c.batches, c.count, 0)
		for _, limit := range c.limits {
			s, err := l.ReadBelow(0, 1<<30, limit)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Bytes()
			s.Release()
			if err != nil {
				t.Fatal(err)
			}
			// Every batch with a base offset below limit.
			n := int64(c.count)
			want := min((limit+n-1)/n*n, l.EndOffset())
			if got := int64(len(decodeAll(t, b))); got != want {
				t.Errorf("%s: ReadBelow(limit %d) returned %d records, want %d", c.name, limit, got, want)
			}
		}
		l.Close()
	}
}
