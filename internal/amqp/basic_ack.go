package amqp

import (
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// settleOp is what happens to settled deliveries in their queue.
type settleOp uint8

const (
	settleAck     settleOp = iota // basic.ack: gone
	settleRequeue                 // nack/reject requeue=true, recover, channel closed: back to the queue
	settleDiscard                 // nack/reject requeue=false: dropped (dead-lettering is mq's, later)
)

func (ch *channel) basicAck(m *amqpwire.BasicAck) error {
	return ch.settleTags(m.DeliveryTag, m.Multiple, settleAck, m.ID())
}

func (ch *channel) basicNack(m *amqpwire.BasicNack) error {
	return ch.settleTags(m.DeliveryTag, m.Multiple, requeueOrDiscard(m.Requeue), m.ID())
}

func (ch *channel) basicReject(m *amqpwire.BasicReject) error {
	return ch.settleTags(m.DeliveryTag, false, requeueOrDiscard(m.Requeue), m.ID())
}

func requeueOrDiscard(requeue bool) settleOp {
	if requeue {
		return settleRequeue
	}
	return settleDiscard
}

// settleTags settles the deliveries a client's ack, nack or reject names.
// An unknown tag is RabbitMQ's 406 "unknown delivery tag", which closes the
// channel. In a transaction the settlement waits for tx.commit.
func (ch *channel) settleTags(tag uint64, multiple bool, op settleOp, id amqpwire.MethodID) error {
	ch.mu.Lock()
	taken, ok := ch.unacked.take(tag, multiple)
	ch.mu.Unlock()
	if !ok {
		return amqpwire.Errorf(amqpwire.CodePreconditionFailed, "unknown delivery tag %d", tag).In(id)
	}
	if ch.tx != nil {
		ch.tx.settle(op, taken)
		return nil
	}
	ch.settle(op, taken)
	return nil
}

// settle applies op to deliveries already taken from the unacked set:
// their prefetch credit is returned, the queues are told, and consumers
// that were refused for lack of credit are resumed.
func (ch *channel) settle(op settleOp, taken []pendingDelivery) {
	if len(taken) == 0 {
		return
	}
	if op == settleAck {
		ch.stats.add(statAck, uint64(len(taken)))
	}
	ch.mu.Lock()
	for _, p := range taken {
		if p.cons != nil {
			p.cons.unacked--
			ch.consumerUnacked--
		}
	}
	resume := ch.creditedLocked()
	ch.mu.Unlock()

	ch.c.applySettlement(op, taken)
	for _, k := range resume {
		k.resume()
	}
}

// creditedLocked returns the consumers refused for lack of prefetch credit
// that have credit again, clearing their flag. ch.mu must be held.
func (ch *channel) creditedLocked() []*consumer {
	if ch.prefetch > 0 && ch.consumerUnacked >= ch.prefetch {
		return nil
	}
	var resume []*consumer
	for _, k := range ch.consumers {
		if k.starved && k.hasCreditLocked() {
			k.starved = false
			resume = append(resume, k)
		}
	}
	return resume
}

// basicRecover redelivers every unacknowledged delivery of the channel by
// requeueing it, as RabbitMQ does. requeue=false (redeliver to the same
// consumer) is refused with 540 like RabbitMQ.
func (ch *channel) basicRecover(requeue bool, m amqpwire.Method) error {
	if !requeue {
		return amqpwire.Errorf(amqpwire.CodeNotImplemented, "requeue=false").In(m.ID())
	}
	ch.mu.Lock()
	taken := ch.unacked.takeAll()
	ch.mu.Unlock()
	ch.settle(settleRequeue, taken)
	if m.ID() == amqpwire.BasicRecoverID {
		ch.c.out.method(ch.id, &amqpwire.BasicRecoverOK{})
	}
	return nil
}

// applySettlement tells each queue about its settled deliveries, one call
// per queue with the tags in delivery order (a requeue puts them back at
// the front in that order). Errors mean the queue is gone, and its
// messages with it.
func (c *conn) applySettlement(op settleOp, taken []pendingDelivery) {
	if len(taken) == 0 {
		return
	}
	type group struct {
		queue string
		tags  []mq.QueueTag
	}
	var groups []group
	for _, p := range taken {
		i := 0
		for i < len(groups) && groups[i].queue != p.queue {
			i++
		}
		if i == len(groups) {
			groups = append(groups, group{queue: p.queue, tags: make([]mq.QueueTag, 0, len(taken))})
		}
		groups[i].tags = append(groups[i].tags, p.qtag)
	}
	for _, g := range groups {
		var err error
		switch op {
		case settleAck:
			err = c.vhost.Ack(g.queue, g.tags...)
		case settleRequeue:
			err = c.vhost.Requeue(g.queue, g.tags...)
		case settleDiscard:
			err = c.vhost.Discard(g.queue, g.tags...)
		}
		if err != nil {
			c.log.Debug("settling deliveries failed", "queue", g.queue, "err", err)
		}
	}
}
