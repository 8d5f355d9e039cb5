package seglog

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wharf-mq/wharf/internal/record"
)

// A log told to drop its cache behind keep bytes leaves, after a sync
// and DropCached, none of the pages it made durable further back than that in the
// page cache, and keeps the rest; one not told keeps them all.
func TestDropCacheBehind(t *testing.T) {
	const keep = 1 << 20
	for _, drop := range []bool{false, true} {
		dir := t.TempDir()
		var fs unix.Statfs_t
		if err := unix.Statfs(dir, &fs); err != nil {
			t.Fatal(err)
		}
		if fs.Type == unix.TMPFS_MAGIC {
			t.Skipf("%s is on tmpfs, whose pages are the files themselves: nothing to drop", dir)
		}
		l := mustOpen(t, dir, DefaultConfig())
		if drop {
			l.DropCacheBehind(keep)
		}
		value := make([]byte, 64<<10)
		recs := make([]record.Record, 16)
		for i := range recs {
			recs[i] = record.Record{Value: value}
		}
		for range 6 { // 6 MiB, then one round
			if _, err := l.Append(record.NewBatch(0, recs), AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		l.DropCached()
		size := l.activeLocked().size
		resident := residentPages(t, l.activeLocked().logPath, size)
		l.Close()

		page := os.Getpagesize()
		dropped := 0
		for i, in := range resident {
			if !in {
				dropped++
			}
			inKept := int64((i+1)*page) > size-keep
			if drop && in && !inKept {
				t.Fatalf("page %d of %d, more than %d bytes behind the durable end, is still cached", i, len(resident), keep)
			}
		}
		if !drop && dropped > 0 {
			t.Fatalf("%d of %d pages were dropped from the cache of a log that keeps them", dropped, len(resident))
		}
		if drop && dropped < len(resident)-keep/page-1 {
			t.Fatalf("%d of %d pages dropped, want all but the last %d bytes' (%d pages)", dropped, len(resident), keep, keep/page)
		}
	}
}

// residentPages reports, for each page of the first size bytes of path,
// whether it is in the page cache (mincore on a mapping of it).
func residentPages(t *testing.T, path string, size int64) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	in := make([]bool, len(vec))
	for i, v := range vec {
		in[i] = v&1 != 0
	}
	return in
}
