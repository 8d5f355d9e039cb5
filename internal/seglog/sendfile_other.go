//go:build !linux

package seglog

import "io"

// writeChunk copies with pread; the sendfile path is Linux-only (see
// sendfile_linux.go).
func writeChunk(w io.Writer, c Chunk) (int64, error) { return copyChunk(w, c) }
