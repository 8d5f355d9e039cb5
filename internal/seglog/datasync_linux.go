package seglog

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (and the metadata needed to read it back, such
// as its size) with fdatasync(2), which skips timestamps fsync would write.
func fdatasync(f *os.File) error {
	if err := onDescriptor(f, syscall.Fdatasync); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}

// onDescriptor runs call on f's descriptor, again while it fails with
// EINTR.
func onDescriptor(f *os.File, call func(fd int) error) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var callErr error
	if err := raw.Control(func(fd uintptr) {
		for {
			if callErr = call(int(fd)); callErr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return callErr
}
