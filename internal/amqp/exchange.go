package amqp

import (
	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

func (ch *channel) exchangeDeclare(m *amqpwire.ExchangeDeclare) error {
	def := mq.ExchangeDef{
		Name:       m.Exchange,
		Type:       m.Type,
		Durable:    m.Durable,
		AutoDelete: m.AutoDelete,
		Internal:   m.Internal,
		Args:       m.Arguments,
	}
	v := ch.c.vhost
	err := ch.c.access.DeclareExchange(m.Exchange, m.Passive, m.Arguments, func() bool { return v.HasExchange(m.Exchange) })
	if err != nil {
		return mqError(err, m.ID())
	}
	if err := v.DeclareExchange(def, m.Passive); err != nil {
		return mqError(err, m.ID())
	}
	ch.reply(m.NoWait, &amqpwire.ExchangeDeclareOK{})
	return nil
}

func (ch *channel) exchangeDelete(m *amqpwire.ExchangeDelete) error {
	if err := ch.c.access.Delete(access.Exchange, m.Exchange); err != nil {
		return mqError(err, m.ID())
	}
	if err := ch.c.vhost.DeleteExchange(m.Exchange, m.IfUnused); err != nil {
		return mqError(err, m.ID())
	}
	ch.reply(m.NoWait, &amqpwire.ExchangeDeleteOK{})
	return nil
}

func (ch *channel) exchangeBind(m *amqpwire.ExchangeBind) error {
	if err := ch.checkBind(access.Exchange, m.Destination, m.Source, m.RoutingKey); err != nil {
		return mqError(err, m.ID())
	}
	if err := ch.c.vhost.BindExchange(m.Destination, m.Source, m.RoutingKey, m.Arguments); err != nil {
		return mqError(err, m.ID())
	}
	ch.reply(m.NoWait, &amqpwire.ExchangeBindOK{})
	return nil
}

func (ch *channel) exchangeUnbind(m *amqpwire.ExchangeUnbind) error {
	if err := ch.checkBind(access.Exchange, m.Destination, m.Source, m.RoutingKey); err != nil {
		return mqError(err, m.ID())
	}
	if err := ch.c.vhost.UnbindExchange(m.Destination, m.Source, m.RoutingKey, m.Arguments); err != nil {
		return mqError(err, m.ID())
	}
	ch.reply(m.NoWait, &amqpwire.ExchangeUnbindOK{})
	return nil
}
