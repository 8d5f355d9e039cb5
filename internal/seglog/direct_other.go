//go:build !linux

package seglog

import (
	"errors"
	"os"
)

// openDirect refuses: direct writes are implemented for Linux only, and
// the log writes through the page cache elsewhere.
func openDirect(path string) (*os.File, error) {
	return nil, errors.New("seglog: direct writes need Linux")
}
