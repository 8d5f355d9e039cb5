//go:build !linux

package main

import "errors"

// dropPageCache is Linux-only: elsewhere a cold-cache read cannot be set
// up, and the workloads needing one fail with this error.
func dropPageCache(string) (string, error) {
	return "", errors.New("dropping the page cache is implemented for Linux only")
}
