package amqp

import (
	"github.com/wharf-mq/wharf/internal/amqp/wire"
)

// channelFlow answers channel.flow. Like RabbitMQ (since 3.3), Wharf only
// accepts active=true: consumers that need to pause use prefetch.
func (ch *channel) channelFlow(m *wire.ChannelFlow) error {
	if !m.Active {
		return wire.Errorf(wire.CodeNotImplemented, "active=false").In(m.ID())
	}
	ch.c.out.method(ch.id, &wire.ChannelFlowOK{Active: true})
	return nil
}
