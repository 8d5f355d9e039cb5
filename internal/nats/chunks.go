package nats

import "sync"

// Outbound bytes are kept in chunks of three sizes, taken from pools and
// given back once written, so that queuing a message never copies what is
// already queued, a backlog costs no more than its bytes, and an idle
// connection holds no buffer at all. A connection with little to send
// uses small chunks; once it has a queue, large ones.
const (
	smallChunk  = 512
	mediumChunk = 4 << 10
	largeChunk  = 64 << 10
)

var (
	smallChunks  = sync.Pool{New: func() any { return new([smallChunk]byte) }}
	mediumChunks = sync.Pool{New: func() any { return new([mediumChunk]byte) }}
	largeChunks  = sync.Pool{New: func() any { return new([largeChunk]byte) }}
)

// newChunk returns an empty chunk from the pools: the smallest that holds
// want bytes when the queue is empty, a large one otherwise.
func newChunk(want int, queueEmpty bool) []byte {
	switch {
	case queueEmpty && want <= smallChunk:
		return smallChunks.Get().(*[smallChunk]byte)[:0]
	case queueEmpty && want <= mediumChunk:
		return mediumChunks.Get().(*[mediumChunk]byte)[:0]
	}
	return largeChunks.Get().(*[largeChunk]byte)[:0]
}

// freeChunk gives a written chunk back to its pool.
func freeChunk(c []byte) {
	switch cap(c) {
	case smallChunk:
		smallChunks.Put((*[smallChunk]byte)(c[:smallChunk]))
	case mediumChunk:
		mediumChunks.Put((*[mediumChunk]byte)(c[:mediumChunk]))
	case largeChunk:
		largeChunks.Put((*[largeChunk]byte)(c[:largeChunk]))
	}
}

// chunkQueue is a sequence of bytes held as pooled chunks.
type chunkQueue struct {
	chunks [][]byte
	size   int
}

// write appends p, filling the last chunk before taking new ones.
func (q *chunkQueue) write(p []byte) {
	q.size += len(p)
	if n := len(q.chunks); n > 0 {
		last := &q.chunks[n-1]
		k := copy((*last)[len(*last):cap(*last)], p)
		*last = (*last)[:len(*last)+k]
		p = p[k:]
	}
	for len(p) > 0 {
		c := newChunk(len(p), len(q.chunks) == 0)
		k := copy(c[:cap(c)], p)
		q.chunks = append(q.chunks, c[:k])
		p = p[k:]
	}
}

// free gives every chunk back and empties q, keeping its slice for reuse.
func (q *chunkQueue) free() {
	for i, c := range q.chunks {
		freeChunk(c)
		q.chunks[i] = nil
	}
	q.chunks, q.size = q.chunks[:0], 0
}
