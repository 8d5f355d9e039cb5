package amqp

import (
	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// basicQos sets prefetch limits with RabbitMQ's meaning of global:
// global=false limits each consumer created on the channel from now on,
// global=true limits the channel as a whole. prefetch_size is refused with
// 540 as RabbitMQ does.
func (ch *channel) basicQos(m *amqpwire.BasicQos) error {
	if m.PrefetchSize != 0 {
		return amqpwire.Errorf(amqpwire.CodeNotImplemented, "prefetch_size!=0 (%d)", m.PrefetchSize).In(m.ID())
	}
	if !m.Global {
		ch.mu.Lock()
		ch.consumerPrefetch = int(m.PrefetchCount)
		ch.mu.Unlock()
		ch.c.out.method(ch.id, &amqpwire.BasicQosOK{})
		return nil
	}
	ch.mu.Lock()
	ch.prefetch = int(m.PrefetchCount)
	resume := ch.creditedLocked() // a raised limit frees credit
	ch.mu.Unlock()
	ch.c.out.method(ch.id, &amqpwire.BasicQosOK{})
	for _, k := range resume {
		k.resume()
	}
	return nil
}
