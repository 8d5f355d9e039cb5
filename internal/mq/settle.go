package mq

// Settlement. The front end maps its channel's delivery tags to (queue,
// QueueTag). A queue that no longer exists, or a tag it does not hold as
// unacknowledged (already settled, or from a deleted queue of the same
// name), is ignored: there is nothing left to settle.

// Ack is basic.ack: the messages are done with.
func (v *VHost) Ack(queue string, tags ...QueueTag) error {
	v.settle(queue, tags, settleAck)
	return nil
}

// Discard is basic.reject / basic.nack without requeue: the messages are
// dropped, and dead-lettered (reason rejected) if the queue has a
// dead-letter exchange.
func (v *VHost) Discard(queue string, tags ...QueueTag) error {
	v.settle(queue, tags, settleDiscard)
	return nil
}

// Requeue is basic.reject / basic.nack with requeue, and what the front end
// does with unacknowledged messages when a channel closes: they go back to
// their original positions in the queue, marked redelivered, and are
// dispatched again. In a quorum queue each return counts: a message
// returned more often than the delivery limit (x-delivery-limit, default
// 20) is dead-lettered (reason delivery_limit) or dropped instead, and
// redeliveries carry the count as the x-delivery-count header.
func (v *VHost) Requeue(queue string, tags ...QueueTag) error {
	v.settle(queue, tags, settleRequeue)
	return nil
}

type settleKind uint8

const (
	settleAck settleKind = iota
	settleDiscard
	settleRequeue
)

func (v *VHost) settle(queue string, tags []QueueTag, kind settleKind) {
	v.mu.RLock()
	q := v.queues[queue]
	v.mu.RUnlock()
	if q == nil {
		return
	}
	if q.remote != nil {
		if tags = q.remote.settle(tags, kind); len(tags) == 0 {
			return
		}
	}
	q.mu.Lock()
	defer q.unlock()
	var back []*entry
	unblocked := false
	var now int64
	for _, tag := range tags {
		e := q.unacked[tag]
		if e == nil {
			continue
		}
		delete(q.unacked, tag)
		if q.releaseLocked(e) {
			unblocked = true
		}
		switch kind {
		case settleAck:
			q.stats.acked.Add(1)
			q.settleLocked(e)
		case settleDiscard:
			if now == 0 {
				now = q.r.nowMs()
			}
			q.discardLocked(e, reasonRejected, now)
		case settleRequeue:
			if q.returnedTooOftenLocked(e) {
				if now == 0 {
					now = q.r.nowMs()
				}
				q.discardLocked(e, reasonDeliveryLimit, now)
				continue
			}
			back = append(back, e)
		}
	}
	if len(back) > 0 {
		// As RabbitMQ's requeue_and_run: back in place, then the length
		// limit and the TTLs apply before dispatch.
		q.requeueLocked(back)
		if now == 0 {
			now = q.r.nowMs()
		}
		if q.opts.limited() && q.opts.overflow == dropHead {
			q.dropOverflowLocked(now)
		}
		q.expireHeadsLocked(now)
		q.armHeadsLocked()
	}
	if len(back) > 0 || unblocked {
		q.dispatchLocked(nil)
	}
}

// pastDeliveryLimitLocked reports whether e, at the head, was returned
// more often than a quorum queue's delivery limit allows: a message whose
// consumer was on a leader that failed is returned by the new leader
// (quorum_cluster.go), which finds it so when it comes to deliver it, and
// dead-letters it then, as a return here would have. Caller holds q.mu.
func (q *queue) pastDeliveryLimitLocked(e *entry) bool {
	limit := q.opts.deliveryLimit
	return q.opts.kind == quorumQueue && limit >= 0 && int64(e.returns) > limit
}

// returnedTooOftenLocked counts a return of e in a quorum queue (durably,
// for a logged message) and reports whether it passed the delivery limit.
func (q *queue) returnedTooOftenLocked(e *entry) bool {
	if q.opts.kind != quorumQueue {
		return false
	}
	e.returns++
	if limit := q.opts.deliveryLimit; limit >= 0 && int64(e.returns) > limit {
		return true
	}
	if e.offset >= 0 && q.store != nil {
		q.store.NoteReturnLocked(e.offset, e.returns)
	}
	return false
}
