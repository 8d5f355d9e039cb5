package amqp

import (
	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// channelFlow answers channel.flow. Like RabbitMQ (since 3.3), Wharf only
// accepts active=true: consumers that need to pause use prefetch.
func (ch *channel) channelFlow(m *amqpwire.ChannelFlow) error {
	if !m.Active {
		return amqpwire.Errorf(amqpwire.CodeNotImplemented, "active=false").In(m.ID())
	}
	ch.c.out.method(ch.id, &amqpwire.ChannelFlowOK{Active: true})
	return nil
}
