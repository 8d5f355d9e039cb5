package main

import (
	"os"
	"syscall"
)

// datasync flushes f with fdatasync(2), the call Wharf's log uses before it
// acknowledges, so the baseline pays the same price per flush.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// preallocate extends f to size bytes of allocated zeros (fallocate(2)
// mode 0), as seglog does ahead of its active segment's data.
func preallocate(f *os.File, size int64) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() >= size {
		return err
	}
	return syscall.Fallocate(int(f.Fd()), 0, fi.Size(), size-fi.Size())
}
