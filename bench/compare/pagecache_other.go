//go:build !linux

package main

import (
	"errors"
	"os"
)

// dropPageCache is Linux-only: elsewhere a cold-cache read cannot be set
// up, and the workloads needing one fail with this error.
func dropPageCache(string) (string, error) {
	return "", errors.New("dropping the page cache is implemented for Linux only")
}

// dropPagesBefore does nothing where posix_fadvise is not used: the
// ceiling's followers then keep their cache.
func dropPagesBefore(*os.File, int64) error { return nil }

// openDirect is Linux-only here, as in internal/seglog: elsewhere the
// ceiling's followers write through the page cache.
func openDirect(string) (*os.File, error) {
	return nil, errors.New("O_DIRECT writes are implemented for Linux only")
}
