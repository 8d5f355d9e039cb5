package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// dropPageCache writes back dirty pages (sync(2)) and then evicts cached
// file pages, so the next read of root's files comes from the disk: the
// whole page cache through /proc/sys/vm/drop_caches when this process may
// write it (root outside a restricting container), else the pages of every
// file under root with posix_fadvise(POSIX_FADV_DONTNEED). It says which.
func dropPageCache(root string) (string, error) {
	syscall.Sync()
	err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
	if err == nil {
		return "page cache dropped (sync, then 3 > /proc/sys/vm/drop_caches)", nil
	}
	files, ferr := adviseDontNeed(root)
	if ferr != nil {
		return "", fmt.Errorf("drop_caches: %v; posix_fadvise: %w", err, ferr)
	}
	return fmt.Sprintf("page cache of the %d files under the data directory evicted with posix_fadvise(DONTNEED) after sync (drop_caches not permitted: %v)", files, err), nil
}

// adviseDontNeed asks the kernel to drop the cached pages of every regular
// file under root (root may be one file) and returns how many there were.
func adviseDontNeed(root string) (int, error) {
	n := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			return &os.PathError{Op: "posix_fadvise", Path: path, Err: err}
		}
		n++
		return nil
	})
	return n, err
}

// dropPagesBefore drops f's cached pages below offset end, which the
// caller has fdatasynced (so none is dirty), as a follower's log does
// behind its synced end.
func dropPagesBefore(f *os.File, end int64) error {
	if err := unix.Fadvise(int(f.Fd()), 0, end, unix.FADV_DONTNEED); err != nil {
		return &os.PathError{Op: "posix_fadvise", Path: f.Name(), Err: err}
	}
	return nil
}

// openDirect opens path for writes past the page cache (O_DIRECT).
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT, 0)
}
