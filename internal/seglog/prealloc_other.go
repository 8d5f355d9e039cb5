//go:build !linux

package seglog

import "os"

// fallocate does nothing here: writes extend the file as they go.
func fallocate(f *os.File, off, n int64) error { return nil }
