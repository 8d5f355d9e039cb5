package kafka

import (
	"sync"
	"sync/atomic"
)

// inflight counts the requests of one connection that were read but not
// yet answered, and the bytes of their frames. The reader acquires before
// reading a frame; the writer releases after answering it.
type inflight struct {
	mu       sync.Mutex
	cond     sync.Cond
	count    int
	bytes    int64
	maxCount int
	maxBytes int64
}

func (f *inflight) init(maxCount int, maxBytes int64) {
	f.cond.L = &f.mu
	f.maxCount, f.maxBytes = maxCount, maxBytes
}

// acquire waits until a frame of size bytes fits: fewer than maxCount in
// flight and their bytes plus size within maxBytes, or nothing in flight
// at all. It returns false, acquiring nothing, if stop is set meanwhile.
func (f *inflight) acquire(size int64, stop *atomic.Bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.count > 0 && (f.count >= f.maxCount || f.bytes+size > f.maxBytes) {
		if stop.Load() {
			return false
		}
		f.cond.Wait()
	}
	if stop.Load() {
		return false
	}
	f.count++
	f.bytes += size
	return true
}

// release returns what acquire took.
func (f *inflight) release(size int64) {
	f.mu.Lock()
	f.count--
	f.bytes -= size
	f.mu.Unlock()
	f.cond.Broadcast()
}

// waitAlone waits until the caller's own request (already acquired) is the
// only one in flight: every earlier one has been answered.
func (f *inflight) waitAlone() {
	f.mu.Lock()
	for f.count > 1 {
		f.cond.Wait()
	}
	f.mu.Unlock()
}

// wake makes waiters recheck their stop condition.
func (f *inflight) wake() {
	f.mu.Lock()
	f.mu.Unlock()
	f.cond.Broadcast()
}
