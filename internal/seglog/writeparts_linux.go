package seglog

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// iovMax is the most buffers one pwritev takes (Linux's IOV_MAX).
const iovMax = 1024

// writeParts writes parts back to back at off with pwritev, again for
// what a short write left.
func writeParts(f *os.File, parts [][]byte, off int64) error {
	parts = append([][]byte(nil), parts...) // trimmed below as they are written
	for len(parts) > 0 {
		var n int
		err := onDescriptor(f, func(fd int) error {
			var err error
			n, err = unix.Pwritev(fd, parts[:min(len(parts), iovMax)], off)
			return err
		})
		if err != nil {
			return &os.PathError{Op: "pwritev", Path: f.Name(), Err: err}
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		off += int64(n)
		for n > 0 {
			if n < len(parts[0]) {
				parts[0] = parts[0][n:]
				break
			}
			n -= len(parts[0])
			parts = parts[1:]
		}
		for len(parts) > 0 && len(parts[0]) == 0 {
			parts = parts[1:]
		}
	}
	return nil
}
