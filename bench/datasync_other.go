//go:build !linux

package main

import "os"

// datasync flushes f; without fdatasync(2) this is fsync.
func datasync(f *os.File) error { return f.Sync() }
