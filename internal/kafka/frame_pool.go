package kafka

import (
	"math/bits"
	"sync"
)

// Request frames of 64 KiB and more come from pools of power-of-two
// buffers, one pool per size, so that a producer sending megabyte requests
// does not make the server allocate (and zero, and collect) a megabyte per
// request. A buffer goes back once its request is answered, and only when
// nothing decoded from it can still point into it (produce requests; see
// conn.dispatch). Smaller frames are plain allocations.
const (
	minPooledFrameShift = 16 // 64 KiB
	maxPooledFrameShift = 27 // 128 MiB, above the largest MaxRequestBytes we expect
	// frameUpFront is the largest frame buffer taken before its bytes
	// have arrived, while the server's up-front allowance has room;
	// franz-go's 8-partition requests of 1 MiB batches fit.
	frameUpFront = 8 << 20
	// frameStart is the buffer a frame starts in otherwise: what a client
	// that announces a request and stalls pins.
	frameStart = 4 << 10
)

var framePools [maxPooledFrameShift - minPooledFrameShift + 1]sync.Pool

// frameShift is log2 of the pooled buffer size that holds n bytes, or -1
// when n is not pooled.
func frameShift(n int) int {
	if n < 1<<minPooledFrameShift || n > 1<<maxPooledFrameShift {
		return -1
	}
	return bits.Len(uint(n - 1))
}

// getFrameBuf returns a buffer of length n, pooled when n is large enough.
// Its contents are arbitrary.
func getFrameBuf(n int) []byte {
	shift := frameShift(n)
	if shift < 0 {
		return make([]byte, n)
	}
	if p, ok := framePools[shift-minPooledFrameShift].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<shift)
}

// putFrameBuf returns a buffer from getFrameBuf to its pool. Buffers whose
// capacity is not a pool size (small frames, nil) are left to the GC.
func putFrameBuf(b []byte) {
	c := cap(b)
	shift := frameShift(c)
	if shift < 0 || c != 1<<shift {
		return
	}
	b = b[:c]
	framePools[shift-minPooledFrameShift].Put(&b)
}
