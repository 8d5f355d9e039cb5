package seglog

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropPages asks the kernel to drop f's cached pages in [off, off+n)
// (posix_fadvise DONTNEED). Clean pages go at once; the caller passes only
// fsynced ranges, so none is dirty.
func dropPages(f *os.File, off, n int64) error {
	return onDescriptor(f, func(fd int) error { return unix.Fadvise(fd, off, n, unix.FADV_DONTNEED) })
}
