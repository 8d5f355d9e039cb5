package mq

import (
	"slices"
	"sync"
	"sync/atomic"
)

// queue is one queue: its ready messages in FIFO order, the delivered ones
// awaiting settlement, its consumers and, when durable, its store.
type queue struct {
	r     *Registry
	vh    *VHost
	name  string
	def   QueueDef    // immutable; Durable is false for exclusive queues
	id    string      // storage directory name (durable queues)
	store *queueStore // nil unless durable

	// sources counts the bindings to this queue by source exchange.
	// Guarded by the vhost's mu.
	sources map[*exchange]int

	mu          sync.Mutex
	deleted     bool
	ready       deque[*entry] // ascending tags
	unacked     map[QueueTag]*entry
	consumers   []*Subscription
	rr          int  // consumers index where the next round-robin search starts
	active      int  // consumers neither paused nor cancelled
	exclusive   bool // a consumer holds exclusive access
	hadConsumer bool // for auto-delete: only a queue that had a consumer goes
	memBytes    int64
}

// entry is one message in one queue.
type entry struct {
	tag         QueueTag
	offset      int64 // in the messages log; -1 if not logged (transient or non-durable queue)
	msg         *held // nil while the body is on disk only (logged entries)
	redelivered bool
}

// held is a message body in memory, shared by the queues it was routed to;
// it counts toward Registry.MemoryUsed once, while any queue holds it.
type held struct {
	msg  *Message
	size int64
	refs atomic.Int32
}

func (r *Registry) retain(h *held) {
	if h.refs.Add(1) == 1 {
		r.mem.Add(h.size)
	}
}

func (r *Registry) release(h *held) {
	if h.refs.Add(-1) == 0 {
		r.mem.Add(-h.size)
	}
}

// holdLocked makes e hold h in memory.
func (q *queue) holdLocked(e *entry, h *held) {
	e.msg = h
	q.memBytes += h.size
	q.r.retain(h)
}

// dropLocked forgets e's in-memory body.
func (q *queue) dropLocked(e *entry) {
	if e.msg != nil {
		q.memBytes -= e.msg.size
		q.r.release(e.msg)
		e.msg = nil
	}
}

func (q *queue) info() QueueInfo {
	q.mu.Lock()
	defer q.mu.Unlock()
	return QueueInfo{Name: q.name, Messages: q.ready.Len(), Consumers: len(q.consumers)}
}

// publish appends one copy of a message: to the messages log first if
// batch is not nil (a persistent message in a durable queue), then to the
// ready list, and dispatches. It reports whether the queue took it and
// whether it was logged (the confirm must wait for this queue's fsync).
func (q *queue) publish(h *held, batch []byte) (took, logged bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return false, false, nil
	}
	e := &entry{tag: q.r.newTag(), offset: -1}
	if batch != nil && q.store != nil {
		if e.offset, err = q.store.append(batch); err != nil {
			return false, false, err
		}
		logged = true
	}
	// A logged body stays on disk only when the queue already holds its
	// share of memory and the message is not about to be delivered.
	pageOut := logged && q.memBytes+h.size > q.r.cfg.QueueMemoryBytes &&
		(q.ready.Len() > 0 || q.active == 0)
	if !pageOut {
		q.holdLocked(e, h)
	}
	q.ready.PushBack(e)
	q.dispatchLocked()
	return true, logged, nil
}

// dispatchLocked hands ready messages to consumers with credit, round
// robin, until the queue is empty or every consumer is paused.
func (q *queue) dispatchLocked() {
	for q.active > 0 && q.ready.Len() > 0 {
		e := q.ready.Front()
		if e.msg == nil && !q.pageInLocked() {
			return
		}
		d := &Delivery{Queue: q.name, Tag: e.tag, Redelivered: e.redelivered, Message: e.msg.msg}
		accepted := false
		for n := len(q.consumers); n > 0 && q.active > 0; n-- {
			s := q.consumers[q.rr]
			q.rr = (q.rr + 1) % len(q.consumers)
			if s.paused {
				continue
			}
			if s.spec.Consumer.TryDeliver(d) {
				q.ready.PopFront()
				q.handOverLocked(e, s.spec.NoAck)
				accepted = true
				break
			}
			s.paused = true
			q.active--
		}
		if !accepted {
			return
		}
	}
}

// handOverLocked records that e (already off the ready list) was handed to
// a consumer or basic.get.
func (q *queue) handOverLocked(e *entry, noAck bool) {
	if e.offset >= 0 && e.offset > q.store.delivered {
		q.store.delivered = e.offset
	}
	if noAck {
		q.settleLocked(e)
		return
	}
	q.unacked[e.tag] = e
}

// settleLocked forgets a message for good: its memory, and for a logged
// one, its place in the log.
func (q *queue) settleLocked(e *entry) {
	q.dropLocked(e)
	if e.offset >= 0 && q.store != nil {
		if q.store.settleLocked(e.offset) {
			q.r.keeper.soon()
		}
	}
}

// pageInBytes is how much of the messages log one page-in reads.
const pageInBytes = 256 << 10

// pageInLocked reads the bodies of on-disk-only ready messages from the
// head on, as far as one read reaches and the queue's memory budget allows
// (always at least the head). It reports whether the head now has its
// body; on a read error it logs and leaves the queue stuck at that message
// rather than lose it.
func (q *queue) pageInLocked() bool {
	head := q.ready.Front()
	i := 0
	err := q.store.read(head.offset, pageInBytes, func(off int64, m *Message) bool {
		for i < q.ready.Len() && q.ready.At(i).msg != nil {
			i++
		}
		if i >= q.ready.Len() {
			return false
		}
		e := q.ready.At(i)
		switch {
		case off < e.offset:
			return true // settled meanwhile, or another entry's: skip
		case off > e.offset:
			return false // the entry's record was not in this read
		}
		q.holdLocked(e, &held{msg: m, size: int64(len(m.Body))})
		i++
		return q.memBytes < q.r.cfg.QueueMemoryBytes
	})
	if err != nil {
		q.r.logger.Error("mq: read message from queue log", "queue", q.name, "vhost", q.vh.name, "offset", head.offset, "err", err)
	}
	return head.msg != nil
}

// requeueLocked puts entries back on the ready list at their original
// positions (ready is ordered by tag), marked redelivered.
func (q *queue) requeueLocked(es []*entry) {
	if len(es) == 0 {
		return
	}
	slices.SortFunc(es, func(a, b *entry) int { return compareTags(a.tag, b.tag) })
	for _, e := range es {
		e.redelivered = true
	}
	if q.ready.Len() == 0 || es[len(es)-1].tag < q.ready.Front().tag {
		for i := len(es) - 1; i >= 0; i-- {
			q.ready.PushFront(es[i])
		}
		return
	}
	rest := q.ready.Drain()
	merged := make([]*entry, 0, len(rest)+len(es))
	i, j := 0, 0
	for i < len(es) || j < len(rest) {
		if j >= len(rest) || (i < len(es) && es[i].tag < rest[j].tag) {
			merged = append(merged, es[i])
			i++
		} else {
			merged = append(merged, rest[j])
			j++
		}
	}
	q.ready.Reset(merged)
}

func compareTags(a, b QueueTag) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// purgeLocked settles every ready message and returns how many there were.
func (q *queue) purgeLocked() int {
	n := q.ready.Len()
	for q.ready.Len() > 0 {
		q.settleLocked(q.ready.PopFront())
	}
	return n
}

// markDeletedLocked ends the queue: it takes no more messages, its memory is
// released, and its subscriptions are cancelled. It returns the Cancelled
// callbacks to run once no lock is held.
func (q *queue) markDeletedLocked() []func() {
	q.deleted = true
	for q.ready.Len() > 0 {
		q.dropLocked(q.ready.PopFront())
	}
	for tag, e := range q.unacked {
		q.dropLocked(e)
		delete(q.unacked, tag)
	}
	var callbacks []func()
	for _, s := range q.consumers {
		s.cancelled = true
		if s.spec.Cancelled != nil {
			callbacks = append(callbacks, s.spec.Cancelled)
		}
	}
	q.consumers, q.active, q.exclusive = nil, 0, false
	return callbacks
}
