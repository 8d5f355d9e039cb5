package seglog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

func TestAppendReadAcrossRolls(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	// Batches of 1..7 records: many segments, batches of different sizes.
	for i := 0; i < 120; i++ {
		appendBatches(t, l, 1, 1+i%7, 1000)
	}
	end := l.EndOffset()
	if n := len(segmentFiles(t, dir)); n < 5 {
		t.Fatalf("only %d segments; the test wants several rolls", n)
	}
	for _, maxBytes := range []int64{1, 300, 5000, 1 << 20} {
		if got := readAll(t, l, maxBytes); int64(len(got)) != end {
			t.Fatalf("maxBytes %d: read %d records, want %d", maxBytes, len(got), end)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	if l.EndOffset() != end {
		t.Fatalf("end after reopen %d, want %d", l.EndOffset(), end)
	}
	if got := readAll(t, l, 1000); int64(len(got)) != end {
		t.Fatalf("after reopen read %d records, want %d", len(got), end)
	}
	// Appends continue after the reopen at the right offset.
	appendBatches(t, l, 3, 2, 1000)
	if got := readAll(t, l, 1<<20); int64(len(got)) != end+6 {
		t.Fatalf("read %d records, want %d", len(got), end+6)
	}
}

func TestReadEveryOffsetInsideBatch(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	appendBatches(t, l, 1, 3, 0)  // offsets 0-2
	appendBatches(t, l, 1, 10, 0) // offsets 3-12: the batch under test
	appendBatches(t, l, 1, 4, 0)  // offsets 13-16
	for off := int64(3); off <= 12; off++ {
		s, err := l.Read(off, 1) // tiny budget: exactly the one batch (KIP-74)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Chunks) != 1 || s.Chunks[0].FirstOffset != 3 {
			t.Fatalf("Read(%d): chunks %+v", off, s.Chunks)
		}
		b, _ := s.Bytes()
		s.Release()
		recs := decodeAll(t, b)
		if len(recs) != 10 || recs[0].offset != 3 || recs[9].offset != 12 {
			t.Fatalf("Read(%d) returned offsets %d..%d (%d records)", off, recs[0].offset, recs[len(recs)-1].offset, len(recs))
		}
	}
}

func TestReadReturnsWholeBatchesWithinMaxBytes(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	batch := makeBatch(0, 5, 0)
	size := int64(len(batch))
	for i := 0; i < 50; i++ {
		appendBatches(t, l, 1, 5, 0)
	}
	for _, budget := range []int64{size - 1, size, size + 1, 3*size - 1, 3 * size, 10*size + 7} {
		s, err := l.Read(0, budget)
		if err != nil {
			t.Fatal(err)
		}
		want := max(budget/size, 1) * size
		if s.Len() != want {
			t.Fatalf("budget %d: got %d bytes, want %d", budget, s.Len(), want)
		}
		s.Release()
	}
}

func TestReadSpansSegments(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	end := appendBatches(t, l, 60, 4, 0)
	s, err := l.Read(0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if len(s.Chunks) < 2 {
		t.Fatalf("one read of everything gave %d chunks", len(s.Chunks))
	}
	b, err := s.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if recs := decodeAll(t, b); int64(len(recs)) != end {
		t.Fatalf("got %d records, want %d", len(recs), end)
	}
	var buf bytes.Buffer
	if n, err := s.WriteTo(&buf); err != nil || n != s.Len() || !bytes.Equal(buf.Bytes(), b) {
		t.Fatalf("WriteTo: %d, %v", n, err)
	}
}

func TestReadOutOfRange(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	end := appendBatches(t, l, 3, 2, 0)
	if _, err := l.Read(end+1, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read past end: %v", err)
	}
	if _, err := l.Read(-1, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read(-1): %v", err)
	}
	s, err := l.Read(end, 100)
	if err != nil || s.Len() != 0 {
		t.Fatalf("Read(end): %v, %d bytes", err, s.Len())
	}
	s.Release()
	s.Release() // twice is fine
}

func TestAppendStampsLogAppendTimeAndRejectsGarbage(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	two := append(makeBatch(0, 2, 5), makeBatch(2, 3, 5)...)
	res, err := l.Append(two, AppendOptions{LogAppendTime: 777})
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 0 || res.LastOffset != 4 || res.LogAppendTime != 777 {
		t.Fatalf("result %+v", res)
	}
	s, _ := l.Read(0, 1<<20)
	b, _ := s.Bytes()
	s.Release()
	for _, r := range decodeAll(t, b) {
		if r.ts != 777 {
			t.Fatalf("offset %d has timestamp %d", r.offset, r.ts)
		}
	}
	if _, err := l.Append(two[:len(two)-1], AppendOptions{}); !errors.Is(err, record.ErrShort) {
		t.Fatalf("truncated payload: %v", err)
	}
	if _, err := l.Append(nil, AppendOptions{}); err == nil {
		t.Fatal("empty append accepted")
	}
	if l.EndOffset() != 5 {
		t.Fatalf("end %d after rejected appends", l.EndOffset())
	}
}

func TestSegmentMsRollsOnAppend(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.SegmentMs = 60_000
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	appendBatches(t, l, 2, 1, 0)
	if n := len(segmentFiles(t, dir)); n != 1 {
		t.Fatalf("%d segments", n)
	}
	l.mu.Lock()
	l.activeLocked().rollTime = l.activeLocked().rollTime.Add(-2 * 60_000 * 1e6)
	l.mu.Unlock()
	appendBatches(t, l, 1, 1, 0)
	if n := len(segmentFiles(t, dir)); n != 2 {
		t.Fatalf("%d segments after the active one aged past segment.ms", n)
	}
}

func TestClosedLog(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	appendBatches(t, l, 1, 1, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Append(makeBatch(0, 1, 0), AppendOptions{Durable: true}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := l.Read(0, 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	l = mustOpen(t, dir, smallConfig())
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := fileExists(dir); ok {
		t.Fatal("Delete left the directory")
	}
}
