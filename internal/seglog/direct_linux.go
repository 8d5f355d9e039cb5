package seglog

import (
	"os"
	"syscall"
)

// openDirect opens path for writes that bypass the page cache.
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT, 0)
}
