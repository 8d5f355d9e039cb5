package mq

import "github.com/wharf-mq/wharf/internal/amqp/wire"

// Subscription is one consumer of one queue (basic.consume).
type Subscription struct {
	q    *queue
	spec ConsumeSpec

	// Guarded by q.mu.
	paused    bool // no credit: skipped until Resume
	cancelled bool
}

// Consume is basic.consume. The queue must exist (404) and, if exclusive,
// be conn's (405); an exclusive consumer cannot join a queue with consumers
// and no one can join a queue with an exclusive consumer (403).
//
// The subscription starts paused: nothing is delivered until the front end
// calls Resume, which it does after sending basic.consume-ok, so that no
// basic.deliver can overtake it.
func (v *VHost) Consume(queue string, s ConsumeSpec) (*Subscription, error) {
	if s.Consumer == nil {
		panic("mq: ConsumeSpec.Consumer is nil")
	}
	q, err := v.accessQueue(queue, s.Conn)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return nil, errNotFound("queue", queue, v.name)
	}
	if q.exclusive || (s.Exclusive && len(q.consumers) > 0) {
		return nil, errAccessRefused("%s in exclusive use", resource("queue", queue, v.name))
	}
	sub := &Subscription{q: q, spec: s, paused: true}
	q.consumers = append(q.consumers, sub)
	q.hadConsumer = true
	q.exclusive = s.Exclusive
	return sub, nil
}

// Tag returns the consumer tag the subscription was made with.
func (s *Subscription) Tag() string { return s.spec.Tag }

// Resume says the consumer has credit again: delivery to it (re)starts.
func (s *Subscription) Resume() {
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if s.cancelled {
		return
	}
	if s.paused {
		s.paused = false
		q.active++
	}
	q.dispatchLocked()
}

// Cancel ends the subscription (basic.cancel, or its channel closing).
// Messages delivered to it and not settled stay unacknowledged until the
// front end settles them. An auto-delete queue whose last consumer this was
// is deleted. Cancel after the queue was deleted does nothing.
func (s *Subscription) Cancel() {
	q := s.q
	q.mu.Lock()
	if s.cancelled {
		q.mu.Unlock()
		return
	}
	s.cancelled = true
	for i, c := range q.consumers {
		if c != s {
			continue
		}
		q.consumers = append(q.consumers[:i], q.consumers[i+1:]...)
		if i < q.rr {
			q.rr--
		}
		if q.rr >= len(q.consumers) {
			q.rr = 0
		}
		break
	}
	if !s.paused {
		q.active--
	}
	if s.spec.Exclusive {
		q.exclusive = false
	}
	autoDelete := q.def.AutoDelete && q.hadConsumer && len(q.consumers) == 0 && !q.deleted
	q.mu.Unlock()
	if autoDelete {
		q.vh.autoDelete(q)
	}
}

// Get is basic.get: it takes the message at the head of the queue, if any
// (false when empty). With noAck it is settled at once.
func (v *VHost) Get(queue string, noAck bool, conn ConnID) (*Delivery, bool, error) {
	q, err := v.accessQueue(queue, conn)
	if err != nil {
		return nil, false, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return nil, false, errNotFound("queue", queue, v.name)
	}
	if q.ready.Len() == 0 {
		return nil, false, nil
	}
	e := q.ready.Front()
	if e.msg == nil && !q.pageInLocked() {
		return nil, false, wire.Errorf(wire.CodeInternalError, "cannot read message from %s", resource("queue", queue, v.name))
	}
	q.ready.PopFront()
	d := &Delivery{Queue: q.name, Tag: e.tag, Redelivered: e.redelivered, Message: e.msg.msg, MessageCount: q.ready.Len()}
	q.handOverLocked(e, noAck)
	return d, true, nil
}
