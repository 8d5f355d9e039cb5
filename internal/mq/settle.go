package mq

// Settlement. The front end maps its channel's delivery tags to (queue,
// QueueTag). A queue that no longer exists, or a tag it does not hold as
// unacknowledged (already settled, or from a deleted queue of the same
// name), is ignored: there is nothing left to settle.

// Ack is basic.ack: the messages are done with.
func (v *VHost) Ack(queue string, tags ...QueueTag) error {
	v.settle(queue, tags, false)
	return nil
}

// Discard is basic.reject / basic.nack without requeue: the messages are
// dropped (dead-lettering is not implemented yet).
func (v *VHost) Discard(queue string, tags ...QueueTag) error {
	v.settle(queue, tags, false)
	return nil
}

// Requeue is basic.reject / basic.nack with requeue, and what the front end
// does with unacknowledged messages when a channel closes: they go back to
// their original positions in the queue, marked redelivered, and are
// dispatched again.
func (v *VHost) Requeue(queue string, tags ...QueueTag) error {
	v.settle(queue, tags, true)
	return nil
}

func (v *VHost) settle(queue string, tags []QueueTag, requeue bool) {
	v.mu.RLock()
	q := v.queues[queue]
	v.mu.RUnlock()
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var back []*entry
	for _, tag := range tags {
		e := q.unacked[tag]
		if e == nil {
			continue
		}
		delete(q.unacked, tag)
		if requeue {
			back = append(back, e)
		} else {
			q.settleLocked(e)
		}
	}
	if len(back) > 0 {
		q.requeueLocked(back)
		q.dispatchLocked()
	}
}
