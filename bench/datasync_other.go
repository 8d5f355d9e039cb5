//go:build !linux

package main

import "os"

// datasync flushes f; without fdatasync(2) this is fsync.
func datasync(f *os.File) error { return f.Sync() }

// preallocate does nothing here: writes extend the file as they go.
func preallocate(f *os.File, size int64) error { return nil }
