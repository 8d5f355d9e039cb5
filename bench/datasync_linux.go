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
