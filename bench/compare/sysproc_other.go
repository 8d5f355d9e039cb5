//go:build unix && !linux

package main

import (
	"os"
	"syscall"
)

// childSysProcAttr puts a child in its own process group.
func childSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// datasync falls back to fsync where fdatasync is missing.
func datasync(f *os.File) error { return f.Sync() }
