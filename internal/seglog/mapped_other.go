//go:build !linux

package seglog

import "io"

// writeChunkMapped copies with pread; mapping is Linux-only (see
// mapped_linux.go).
func writeChunkMapped(w io.Writer, c Chunk) (int64, error) { return copyChunk(w, c) }

// unmap is never called: no file is mapped here.
func unmap([]byte) {}
