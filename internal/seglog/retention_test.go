package seglog

import (
	"errors"
	"os"
	"testing"
	"time"
)

// segmentBases returns the base offsets of the log's segments.
func segmentBases(l *Log) []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []int64
	for _, s := range l.segments {
		out = append(out, s.base)
	}
	return out
}

func TestRetentionByTimeDeletesOnlyExpiredClosedSegments(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.RetentionMs = 1000
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	// Timestamps = 1_000_000 + offset.
	end := appendBatches(t, l, 150, 3, 1_000_000)
	bases := segmentBases(l)
	if len(bases) < 4 {
		t.Fatalf("%d segments", len(bases))
	}
	// Only the first two segments have a largest timestamp older than now-1000.
	now := time.UnixMilli(1_000_000 + bases[2] - 1 + 1000 + 1)
	n, err := l.ApplyRetention(now)
	if err != nil || n != 2 {
		t.Fatalf("ApplyRetention: %d, %v", n, err)
	}
	if got := segmentBases(l); got[0] != bases[2] || len(got) != len(bases)-2 {
		t.Fatalf("segments %v, was %v", got, bases)
	}
	if l.StartOffset() != bases[2] {
		t.Fatalf("start %d, want %d", l.StartOffset(), bases[2])
	}
	if ok, _ := fileExists(segmentPath(dir, bases[0], logSuffix)); ok {
		t.Fatal("deleted segment's file still exists")
	}
	if _, err := l.Read(bases[2]-1, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	// Far in the future everything closed expires, but never the active segment.
	n, err = l.ApplyRetention(time.UnixMilli(1 << 50))
	if err != nil || n != len(bases)-3 {
		t.Fatalf("ApplyRetention: %d, %v", n, err)
	}
	if got := segmentBases(l); len(got) != 1 || got[0] != bases[len(bases)-1] {
		t.Fatalf("segments %v", got)
	}
	if got := readAll(t, l, 1<<20); int64(len(got)) != end-bases[len(bases)-1] {
		t.Fatalf("read %d records", len(got))
	}
}

func TestRetentionByTimeFallsBackToFileTime(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.RetentionMs = 60_000
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	appendBatches(t, l, 150, 3, -1-150) // timestamps up to -2: "none"
	l.mu.Lock()
	for _, s := range l.segments {
		s.idx.maxTs = -1 // as for a segment of batches without timestamps
	}
	l.mu.Unlock()
	old := time.Now().Add(-time.Hour)
	os.Chtimes(segmentPath(dir, 0, logSuffix), old, old)
	n, err := l.ApplyRetention(time.Now())
	if err != nil || n != 1 {
		t.Fatalf("ApplyRetention: %d, %v (only the first segment's file is old)", n, err)
	}
}

func TestRetentionByBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.RetentionMs = -1
	l := mustOpen(t, dir, cfg)
	appendBatches(t, l, 150, 3, 0)
	bases := segmentBases(l)
	l.mu.RLock()
	var sizes []int64
	for _, s := range l.segments {
		sizes = append(sizes, s.size)
	}
	l.mu.RUnlock()
	total := l.Size()
	// Keep at least the last two segments' worth: exactly the older ones go.
	keep := sizes[len(sizes)-1] + sizes[len(sizes)-2]
	l.SetConfig(Config{SegmentBytes: cfg.SegmentBytes, IndexIntervalBytes: cfg.IndexIntervalBytes, RetentionMs: -1, RetentionBytes: keep})
	n, err := l.ApplyRetention(time.Now())
	if err != nil || n != len(bases)-2 {
		t.Fatalf("ApplyRetention: %d, %v (sizes %v, total %d)", n, err, sizes, total)
	}
	if l.Size() != keep || l.StartOffset() != bases[len(bases)-2] {
		t.Fatalf("size %d start %d", l.Size(), l.StartOffset())
	}
	// RetentionBytes 0 still keeps the active segment.
	l.SetConfig(Config{SegmentBytes: cfg.SegmentBytes, RetentionMs: -1, RetentionBytes: 0})
	if n, _ := l.ApplyRetention(time.Now()); n != 1 || len(segmentBases(l)) != 1 {
		t.Fatalf("deleted %d, %d segments left", n, len(segmentBases(l)))
	}
	start := l.StartOffset()
	l.Close()
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.StartOffset() != start {
		t.Fatalf("start after reopen %d, want %d", l.StartOffset(), start)
	}
}

func TestDeleteBefore(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	end := appendBatches(t, l, 150, 3, 0)
	bases := segmentBases(l)
	mid := bases[2] + 4 // inside the third segment, inside a batch

	if _, err := l.DeleteBefore(end + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("DeleteBefore past end: %v", err)
	}
	start, err := l.DeleteBefore(mid)
	if err != nil || start != mid {
		t.Fatalf("DeleteBefore: %d %v", start, err)
	}
	if got := segmentBases(l); got[0] != bases[2] {
		t.Fatalf("segments %v: want the first two deleted", got)
	}
	if _, err := l.Read(mid-1, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	if got := readAll(t, l, 500); int64(len(got)) != end-mid {
		t.Fatalf("read %d records, want %d", len(got), end-mid)
	}
	if start, _ := l.DeleteBefore(3); start != mid {
		t.Fatalf("DeleteBefore below start moved it to %d", start)
	}
	// A crash right after: the persisted start offset survives.
	l.crash()
	l = mustOpen(t, dir, smallConfig())
	if l.StartOffset() != mid {
		t.Fatalf("start after reopen %d, want %d", l.StartOffset(), mid)
	}
	// Up to the end: every closed segment goes, the active one stays (empty of readable data).
	if start, err := l.DeleteBefore(end); err != nil || start != end {
		t.Fatalf("DeleteBefore(end): %d %v", start, err)
	}
	if len(segmentBases(l)) != 1 {
		t.Fatalf("segments %v", segmentBases(l))
	}
	s, err := l.Read(end, 100)
	if err != nil || s.Len() != 0 {
		t.Fatalf("Read(end): %v", err)
	}
	appendBatches(t, l, 2, 1, 0)
	if got := readAll(t, l, 500); len(got) != 2 {
		t.Fatalf("read %d records after deleting everything", len(got))
	}
	l.Close()
}

func TestSliceSurvivesSegmentDeletionUntilRelease(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	appendBatches(t, l, 150, 3, 0)
	s, err := l.Read(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := s.Bytes()
	f := s.Chunks[0].File
	if _, err := l.DeleteBefore(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if ok, _ := fileExists(segmentPath(dir, 0, logSuffix)); ok {
		t.Fatal("segment file not unlinked")
	}
	got, err := s.Bytes()
	if err != nil || string(got) != string(want) {
		t.Fatalf("slice unreadable after its segment was deleted: %v", err)
	}
	s.Release()
	if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("descriptor still open after the last release: %v", err)
	}
	if _, err := s.Bytes(); err == nil {
		t.Fatal("Bytes after Release succeeded")
	}
}
