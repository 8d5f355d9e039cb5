//go:build !linux

package seglog

import "os"

// datasync flushes f to stable storage (fsync; fdatasync is Linux-only here).
func datasync(f *os.File) error { return syncFile(f) }
