package nats

import "sync"

// outbound is what waits to be written to one client: protocol replies
// and messages, appended by the connection's reader and by the readers of
// every connection that publishes to it, taken in batches by the
// connection's writer goroutine.
type outbound struct {
	mu      sync.Mutex
	buf     []byte // queued, not yet taken by the writer
	pending int    // bytes queued or being written
	limit   int    // Config.MaxPending
	closed  bool   // shut: nothing more is queued
	flush   bool   // shut with what is queued still to be written
	// stall is made when pending passes three quarters of limit and
	// closed once the writer catches up: publishers to a client falling
	// behind wait on it a little (see conn.stallOn), as nats-server's
	// fast-producer stall does, before the client is cut off.
	stall chan struct{}
	wake  chan struct{} // the writer's signal, capacity 1
}

func newOutbound(limit int) outbound {
	return outbound{limit: limit, wake: make(chan struct{}, 1)}
}

// signal wakes the writer.
func (o *outbound) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// grewLocked records that o.buf grew from before bytes, and reports
// whether the client is now past its limit. o.mu is held.
func (o *outbound) grewLocked(before int) (overLimit bool) {
	o.pending += len(o.buf) - before
	if o.pending > o.limit {
		return true
	}
	if o.stall == nil && o.pending > o.limit/4*3 {
		o.stall = make(chan struct{})
	}
	return false
}

// queue appends b, which is a protocol line, unless o is shut.
func (o *outbound) queue(b []byte) (overLimit bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	before := len(o.buf)
	o.buf = append(o.buf, b...)
	return o.grewLocked(before)
}

// shut stops o taking more bytes; unless flush, what is queued is
// dropped. Publishers stalled on o are released. It reports whether this
// call shut o.
func (o *outbound) shut(flush bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.closed, o.flush = true, flush
	if !flush {
		o.buf, o.pending = nil, 0
	}
	o.releaseStallLocked()
	o.signal()
	return true
}

// take hands the writer everything queued, leaving spare (emptied) in its
// place, and reports whether o is shut (then nothing more will come).
func (o *outbound) take(spare []byte) (buf []byte, closed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	buf, o.buf = o.buf, spare[:0]
	if o.closed && !o.flush {
		buf = buf[:0]
	}
	return buf, o.closed
}

// keptWriteBuffer is the largest buffer the writer keeps for the next
// batch; a larger one, left by a burst, goes to the garbage collector.
const keptWriteBuffer = 1 << 20

// written records that buf was written and returns it, emptied, for reuse
// (or nil when it grew too large to keep).
func (o *outbound) written(buf []byte) []byte {
	o.mu.Lock()
	o.pending = max(o.pending-len(buf), 0) // shut without flush zeroes it mid-write
	if o.pending <= o.limit/2 {
		o.releaseStallLocked()
	}
	o.mu.Unlock()
	if cap(buf) > keptWriteBuffer {
		return nil
	}
	return buf[:0]
}

func (o *outbound) releaseStallLocked() {
	if o.stall != nil {
		close(o.stall)
		o.stall = nil
	}
}
