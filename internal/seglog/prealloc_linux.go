package seglog

import (
	"os"
	"syscall"
)

// fallocate allocates n bytes of f from off, extending the file with zeros
// (mode 0: the file's length grows, so later writes there change no size).
func fallocate(f *os.File, off, n int64) error {
	if n <= 0 {
		return nil
	}
	return onDescriptor(f, func(fd int) error { return syscall.Fallocate(fd, 0, off, n) })
}
