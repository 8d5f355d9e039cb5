//go:build !linux

package seglog

import "os"

// openDirect refuses: direct writes are implemented for Linux only, and
// the log writes through the page cache elsewhere.
func openDirect(path string) (*os.File, error) {
	return nil, errDirectUnsupported
}
