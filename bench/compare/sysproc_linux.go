package main

import (
	"os"
	"syscall"
)

// childSysProcAttr puts a child in its own process group (so it and its
// forks are signalled together) and has the kernel kill it if the
// benchmark dies without cleaning up.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// datasync flushes f's data with fdatasync(2), the call Wharf uses before it
// acknowledges a durable write.
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
