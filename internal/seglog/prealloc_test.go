package seglog

import (
	"testing"
)

// TestActiveSegmentIsPreallocated: the active segment's file runs ahead of
// its data, so appends change no file size; the fsync observer is told the
// data's end, not the file's length; and the space is cut off when the
// segment is rolled or the log closed, so closed segments and Size hold
// only batches.
func TestActiveSegmentIsPreallocated(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 256 << 10
	l := mustOpen(t, dir, cfg)
	var reported []int64
	restore := SetSyncHook(func(f SyncedFile) {
		if f.Path == segmentPath(dir, 0, logSuffix) {
			reported = append(reported, f.Stat.Size())
		}
	})
	defer restore()
	if _, err := l.Append(makeBatch(0, 10, 0), AppendOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	first := segmentPath(dir, 0, logSuffix)
	dataEnd := segmentDataEnd(t, first)
	if got := fileSize(t, first); got < dataEnd+minPreallocation {
		t.Fatalf("active segment file is %d bytes for %d bytes of data: not preallocated", got, dataEnd)
	}
	if l.Size() != dataEnd {
		t.Fatalf("Size %d, want the %d bytes of data", l.Size(), dataEnd)
	}
	if len(reported) != 1 || reported[0] != dataEnd {
		t.Fatalf("fsync observer told %v, want [%d]: the data's end, not the file's length", reported, dataEnd)
	}

	for len(segmentFiles(t, dir)) < 3 {
		appendBatches(t, l, 10, 10, 0)
	}
	files := segmentFiles(t, dir)
	for _, path := range files[:len(files)-1] {
		if dataEnd := segmentDataEnd(t, path); fileSize(t, path) != dataEnd {
			t.Fatalf("closed segment %s is %d bytes, its data %d", path, fileSize(t, path), dataEnd)
		}
	}
	end := l.EndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var onDisk int64
	for _, path := range segmentFiles(t, dir) {
		dataEnd := segmentDataEnd(t, path)
		if fileSize(t, path) != dataEnd {
			t.Fatalf("after Close %s is %d bytes, its data %d", path, fileSize(t, path), dataEnd)
		}
		onDisk += dataEnd
	}
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.Size() != onDisk || l.EndOffset() != end {
		t.Fatalf("reopened: Size %d, end %d; want %d, %d", l.Size(), l.EndOffset(), onDisk, end)
	}
	if got := int64(len(readAll(t, l, 1<<20))); got != end {
		t.Fatalf("read %d records, want %d", got, end)
	}
}

// TestPreallocationEnd: ahead by as much as the segment holds, within the
// bounds, never past segment.bytes unless the write itself goes further.
func TestPreallocationEnd(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct{ end, segmentBytes, want int64 }{
		{100, 1 << 30, 100 + minPreallocation},
		{mib, 1 << 30, 2 * mib},
		{64 * mib, 1 << 30, 64*mib + maxPreallocation},
		{100, 4096, 4096},
		{8192, 4096, 8192},
	} {
		if got := preallocationEnd(c.end, c.segmentBytes); got != c.want {
			t.Errorf("preallocationEnd(%d, %d) = %d, want %d", c.end, c.segmentBytes, got, c.want)
		}
	}
}
