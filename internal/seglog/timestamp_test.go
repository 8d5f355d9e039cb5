package seglog

import (
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// timeLog builds a log whose records' timestamps are not monotonic inside
// batches: batch k (4 records, offsets 4k..4k+3) has timestamps
// 100k+{3,0,2,1}*10 — so the first record with timestamp >= ts is often not
// the first record of its batch.
func timeLog(t *testing.T, dir string) *Log {
	l := mustOpen(t, dir, smallConfig())
	for k := int64(0); k < 100; k++ {
		recs := []record.Record{
			{TimestampDelta: 30, Value: value(4 * k)},
			{TimestampDelta: 0, Value: value(4*k + 1)},
			{TimestampDelta: 20, Value: value(4*k + 2)},
			{TimestampDelta: 10, Value: value(4*k + 3)},
		}
		if _, err := l.Append(record.NewBatch(100*k, recs), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// expectedForTime computes the answer by brute force.
func expectedForTime(ts int64) (int64, int64, bool) {
	deltas := []int64{30, 0, 20, 10}
	for k := int64(0); k < 100; k++ {
		for i, d := range deltas {
			if 100*k+d >= ts {
				return 4*k + int64(i), 100*k + d, true
			}
		}
	}
	return -1, -1, false
}

func TestOffsetForTime(t *testing.T) {
	dir := t.TempDir()
	l := timeLog(t, dir)
	check := func(when string) {
		t.Helper()
		for ts := int64(-5); ts <= 100*100; ts += 5 {
			off, got, ok, err := l.OffsetForTime(ts)
			wOff, wTs, wOk := expectedForTime(ts)
			if err != nil || ok != wOk || (ok && (off != wOff || got != wTs)) {
				t.Fatalf("%s: OffsetForTime(%d) = %d, %d, %v, %v; want %d, %d, %v", when, ts, off, got, ok, err, wOff, wTs, wOk)
			}
		}
	}
	check("live")
	// Exactly: ts 1015 is first reached by offset 40 (ts 1030); 1012 too.
	if off, ts, _, _ := l.OffsetForTime(1015); off != 40 || ts != 1030 {
		t.Fatalf("OffsetForTime(1015) = %d, %d", off, ts)
	}
	if off, ts, _, _ := l.OffsetForTime(1020); off != 40 || ts != 1030 {
		t.Fatalf("OffsetForTime(1020) = %d, %d", off, ts)
	}
	if off, ts, _, _ := l.OffsetForTime(1001); off != 40 || ts != 1030 {
		t.Fatalf("OffsetForTime(1001) = %d, %d", off, ts)
	}
	if off, ts, _, _ := l.OffsetForTime(1000); off != 40 || ts != 1030 {
		t.Fatalf("OffsetForTime(1000) = %d, %d", off, ts)
	}
	l.Close()
	l = mustOpen(t, dir, smallConfig())
	check("after clean reopen")
	l.crash()
	l = mustOpen(t, dir, smallConfig())
	check("after recovery")
	defer l.Close()

	// Records below the start offset do not count.
	l.DeleteBefore(42)
	if off, ts, ok, _ := l.OffsetForTime(1000); !ok || off != 42 || ts != 1020 {
		t.Fatalf("after DeleteBefore(42): OffsetForTime(1000) = %d, %d, %v", off, ts, ok)
	}
}

func TestOffsetForTimeLogAppendTime(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	for i := int64(0); i < 20; i++ {
		if _, err := l.Append(makeBatch(3*i, 3, 5), AppendOptions{LogAppendTime: 1000 + 10*i}); err != nil {
			t.Fatal(err)
		}
	}
	// Every record carries its batch's append time, whatever the producer set.
	if off, ts, ok, _ := l.OffsetForTime(1055); !ok || off != 18 || ts != 1060 {
		t.Fatalf("OffsetForTime(1055) = %d, %d, %v", off, ts, ok)
	}
	if off, ts := l.MaxTimestamp(); off != 57 || ts != 1190 {
		t.Fatalf("MaxTimestamp = %d, %d", off, ts)
	}
}

func TestMaxTimestamp(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	if off, ts := l.MaxTimestamp(); off != -1 || ts != -1 {
		t.Fatalf("empty log: %d, %d", off, ts)
	}
	// The maximum sits in the middle of the log, in the middle of a batch.
	for k := int64(0); k < 100; k++ {
		recs := []record.Record{{Value: value(3 * k)}, {Value: value(3*k + 1)}, {Value: value(3*k + 2)}}
		if k == 40 {
			recs[1].TimestampDelta = 1_000_000
		}
		if _, err := l.Append(record.NewBatch(k, recs), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if off, ts := l.MaxTimestamp(); off != 121 || ts != 1_000_040 {
		t.Fatalf("MaxTimestamp = %d, %d", off, ts)
	}
	l.Close()
	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	for range 2 { // the second call uses the cached batch
		if off, ts := l.MaxTimestamp(); off != 121 || ts != 1_000_040 {
			t.Fatalf("after reopen MaxTimestamp = %d, %d", off, ts)
		}
	}
}
