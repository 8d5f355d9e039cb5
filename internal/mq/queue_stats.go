package mq

import (
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/rate"
)

// queueStats counts what happens to a queue's messages, for the management
// API's message_stats (RabbitMQ's names). The counters only grow; rates
// come from sampling them when they are read (internal/rate), so a queue
// nobody looks at pays one atomic add per event. Stream queues are not
// counted: their messages never pass through the ready list.
type queueStats struct {
	published, delivered, deliveredNoAck, got, gotNoAck, redelivered, acked atomic.Uint64

	counters, depth rate.Sampler
}

// handedOver counts a message leaving the ready list: to a consumer
// (consumer true) or to basic.get, settled at once with noAck.
func (st *queueStats) handedOver(consumer, noAck, redelivered bool) {
	switch {
	case consumer && noAck:
		st.deliveredNoAck.Add(1)
	case consumer:
		st.delivered.Add(1)
	case noAck:
		st.gotNoAck.Add(1)
	default:
		st.got.Add(1)
	}
	if redelivered {
		st.redelivered.Add(1)
	}
}

// gotWithoutAck counts a basic.get taken with ack (handedOver) and
// settled at once, a quorum queue's without ack (getReply), as one
// without ack.
func (st *queueStats) gotWithoutAck() {
	st.got.Add(^uint64(0)) // minus one
	st.gotNoAck.Add(1)
}

// QueueStats is a queue's details with its message counters and rates.
type QueueStats struct {
	QueueDetail
	// MessageStats are RabbitMQ's message_stats of a queue: publish,
	// deliver, deliver_no_ack, get, get_no_ack, deliver_get (the four
	// before it together), redeliver and ack, since the queue was
	// declared or the broker started.
	MessageStats []rate.Stat
	// Depth is messages, messages_ready and messages_unacknowledged with
	// the rates at which they change.
	Depth []rate.Stat
}

func (q *queue) statsAt(now time.Time) QueueStats {
	st := &q.stats
	d := q.detail()
	delivered, deliveredNoAck := int64(st.delivered.Load()), int64(st.deliveredNoAck.Load())
	got, gotNoAck := int64(st.got.Load()), int64(st.gotNoAck.Load())
	counters := []rate.Stat{
		{Name: "publish", Value: int64(st.published.Load())},
		{Name: "deliver", Value: delivered},
		{Name: "deliver_no_ack", Value: deliveredNoAck},
		{Name: "get", Value: got},
		{Name: "get_no_ack", Value: gotNoAck},
		{Name: "deliver_get", Value: delivered + deliveredNoAck + got + gotNoAck},
		{Name: "redeliver", Value: int64(st.redelivered.Load())},
		{Name: "ack", Value: int64(st.acked.Load())},
	}
	st.counters.Sample(now, counters)
	depth := []rate.Stat{
		{Name: "messages", Value: int64(d.Messages)},
		{Name: "messages_ready", Value: int64(d.MessagesReady)},
		{Name: "messages_unacknowledged", Value: int64(d.MessagesUnacknowledged)},
	}
	st.depth.Sample(now, depth)
	return QueueStats{QueueDetail: d, MessageStats: counters, Depth: depth}
}
