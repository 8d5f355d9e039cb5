package mq

import "github.com/wharf-mq/wharf/internal/amqpwire"

// Crashed queues. A durable queue whose logs cannot be opened or read back
// (a corrupt batch found at Open, by a read, or by the scrubber of the
// queue stores) is taken out of service on its own, as RabbitMQ leaves a
// classic queue that crashed on its data: the node and every other queue
// keep serving. The queue keeps its definition, bindings and files, so
// nothing is lost that a repair (or a restart after one) could bring back.
// Until then:
//
//   - declare, passive declare, basic.get, basic.consume and queue.purge
//     get 404 NOT_FOUND "queue 'q' in vhost '/' has crashed and failed to
//     restart" (RabbitMQ's text for such a queue; the broker log says
//     why) on their channel;
//   - a message routed to it is refused (a nack in confirm mode): it cannot
//     be stored there, and Wharf never confirms what it did not store
//     (RabbitMQ drops it);
//   - its consumers are cancelled (basic.cancel), its unacknowledged
//     deliveries forgotten (they stay in the log, unsettled);
//   - queue.delete works and removes its files.

// errCrashed is the answer to operations on a crashed queue.
func errCrashed(queue, vhost string) *Error {
	return amqpwire.Errorf(amqpwire.CodeNotFound, "%s has crashed and failed to restart", resource("queue", queue, vhost))
}

// crash takes q out of service for good (until a restart): its storage
// failed with cause. No lock may be held. The scrubber calls it too
// (queuestore.Owner.Crash).
func (q *queue) crash(cause error) {
	if q.crashed.Swap(true) {
		return
	}
	q.r.logger.Error("mq: queue out of service: its storage is damaged or unreadable; "+
		"other queues are not affected", "queue", q.name, "vhost", q.vh.name, "err", cause)
	q.mu.Lock()
	cancelled := q.markDeletedLocked()
	q.mu.Unlock()
	if q.store != nil {
		q.store.CloseWithoutMarker()
	}
	for _, cb := range cancelled {
		cb()
	}
}

// crashAtOpen marks a queue whose store could not be opened crashed. Its
// store is closed, and kept so that deleting the queue removes its files.
func (q *queue) crashAtOpen(cause error) {
	q.crashed.Store(true)
	q.deleted = true // inert: takes no message, arms no timer
	q.r.logger.Error("mq: queue out of service: its storage cannot be opened; other queues are not affected",
		"queue", q.name, "vhost", q.vh.name, "dir", q.store.Dir(), "err", cause)
}
