//go:build !linux

package seglog

import "os"

// fdatasync flushes f to stable storage (fsync; fdatasync is Linux-only here).
func fdatasync(f *os.File) error { return f.Sync() }
