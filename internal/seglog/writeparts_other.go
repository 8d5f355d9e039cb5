//go:build !linux

package seglog

import (
	"bytes"
	"os"
)

// writeParts writes parts back to back at off, copied together first.
func writeParts(f *os.File, parts [][]byte, off int64) error {
	_, err := f.WriteAt(bytes.Join(parts, nil), off)
	return err
}
