package nats

import "sync"

// outbound is what waits to be written to one client: protocol replies
// and messages, queued by the connection's reader and by the readers of
// every connection that publishes to it, taken in batches by the
// connection's writer goroutine.
type outbound struct {
	mu      sync.Mutex
	queued  chunkQueue // not yet taken by the writer
	pending int        // bytes queued or being written
	limit   int        // Config.MaxPending
	closed  bool       // shut: nothing more is queued
	flush   bool       // shut with what is queued still to be written
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

// writeLocked queues parts, one after the other, and reports whether the
// client is now past its limit. o.mu is held and o is not closed.
func (o *outbound) writeLocked(parts ...[]byte) (overLimit bool) {
	for _, p := range parts {
		o.queued.write(p)
		o.pending += len(p)
	}
	if o.pending > o.limit {
		return true
	}
	if o.stall == nil && o.pending > o.limit/4*3 {
		o.stall = make(chan struct{})
	}
	return false
}

// queue appends b, a protocol line, unless o is shut.
func (o *outbound) queue(b []byte) (overLimit bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	return o.writeLocked(b)
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
		o.queued.free()
		o.pending = 0
	}
	o.releaseStallLocked()
	o.signal()
	return true
}

// take moves everything queued into batch (emptied first) and reports
// whether o is shut, in which case nothing more will be queued.
func (o *outbound) take(batch *chunkQueue) (closed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.queued, *batch = *batch, o.queued
	return o.closed
}

// written records that batch was written.
func (o *outbound) written(batch *chunkQueue) {
	o.mu.Lock()
	o.pending = max(o.pending-batch.size, 0) // shut without flush zeroes it mid-write
	if o.pending <= o.limit/2 {
		o.releaseStallLocked()
	}
	o.mu.Unlock()
	batch.free()
}

func (o *outbound) releaseStallLocked() {
	if o.stall != nil {
		close(o.stall)
		o.stall = nil
	}
}
