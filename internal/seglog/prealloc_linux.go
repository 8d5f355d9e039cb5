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
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		for {
			serr = syscall.Fallocate(int(fd), 0, off, n)
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}
