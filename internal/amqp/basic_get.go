package amqp

import (
	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// basicGet fetches one message synchronously: basic.get-ok with the
// message, or basic.get-empty. Without no-ack the delivery joins the
// channel's unacked set (it counts against no prefetch limit).
func (ch *channel) basicGet(m *amqpwire.BasicGet) error {
	queue, err := ch.queueName(m.Queue, m.ID())
	if err != nil {
		return err
	}
	if err := ch.c.access.ReadQueue(queue); err != nil {
		return mqError(err, m.ID())
	}
	d, ok, err := ch.c.vhost.Get(queue, m.NoAck, ch.c.id)
	if err != nil {
		return mqError(err, m.ID())
	}
	if !ok {
		ch.stats.add(statGetEmpty, 1)
		ch.c.out.method(ch.id, &amqpwire.BasicGetEmpty{})
		return nil
	}
	ch.countHandedOver(false, m.NoAck, d.Redelivered)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.nextTag++
	tag := ch.nextTag
	if !m.NoAck {
		ch.unacked.add(pendingDelivery{tag: tag, queue: d.Queue, qtag: d.Tag})
	}
	ch.c.out.push(outItem{
		kind:    outContent,
		channel: ch.id,
		method: &amqpwire.BasicGetOK{
			DeliveryTag:  tag,
			Redelivered:  d.Redelivered,
			Exchange:     d.Message.Exchange,
			RoutingKey:   d.Message.RoutingKey,
			MessageCount: uint32(max(d.MessageCount, 0)),
		},
		msg: d.Message,
	})
	return nil
}
