package amqp

import (
	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// queueDeclare declares (or with passive, checks) a queue and remembers it
// as the channel's last queue. An empty name asks for a server-named
// "amq.gen-" queue.
func (ch *channel) queueDeclare(m *amqpwire.QueueDeclare) error {
	name := m.Queue
	if name == "" && m.Passive {
		// RabbitMQ lets a passive declare of "" name the last queue.
		name = ch.lastQueue
	}
	if err := ch.checkQueueDeclare(name, m); err != nil {
		return err
	}
	info, err := ch.c.vhost.DeclareQueue(mq.QueueDef{
		Name:       name,
		Durable:    m.Durable,
		Exclusive:  m.Exclusive,
		AutoDelete: m.AutoDelete,
		Args:       m.Arguments,
		Owner:      ch.c.id,
	}, m.Passive)
	if err != nil {
		return mqError(err, m.ID())
	}
	ch.lastQueue = info.Name
	ch.reply(m.NoWait, &amqpwire.QueueDeclareOK{
		Queue:         info.Name,
		MessageCount:  uint32(max(info.Messages, 0)),
		ConsumerCount: uint32(max(info.Consumers, 0)),
	})
	return nil
}

// checkQueueDeclare checks the user's permissions for queue.declare of
// name. A server-named queue is checked under a name of the form it will
// get, as RabbitMQ checks the name it generated.
func (ch *channel) checkQueueDeclare(name string, m *amqpwire.QueueDeclare) error {
	v := ch.c.vhost
	if name == "" && !m.Passive {
		name = mq.ServerQueueName()
	}
	if mq.IsReplyTo(name) {
		return nil // a check that a direct reply-to consumer is there, which RabbitMQ lets anyone make
	}
	err := ch.c.access.DeclareQueue(name, m.Passive, m.Arguments, func() bool { return v.HasQueue(name) })
	if err != nil {
		return mqError(err, m.ID())
	}
	return nil
}

func (ch *channel) queueBind(m *amqpwire.QueueBind) error {
	queue, err := ch.queueName(m.Queue, m.ID())
	if err != nil {
		return err
	}
	key := m.RoutingKey
	if m.Queue == "" && key == "" {
		// RabbitMQ's shortcut: both empty binds the last queue by its name.
		key = queue
	}
	if err := ch.checkBind(access.Queue, queue, m.Exchange, key); err != nil {
		return mqError(err, m.ID())
	}
	if err := ch.c.vhost.BindQueue(queue, m.Exchange, key, m.Arguments, ch.c.id); err != nil {
		return mqError(err, m.ID())
	}
	ch.reply(m.NoWait, &amqpwire.QueueBindOK{})
	return nil
}

func (ch *channel) queueUnbind(m *amqpwire.QueueUnbind) error {
	queue, err := ch.queueName(m.Queue, m.ID())
	if err != nil {
		return err
	}
	key := m.RoutingKey
	if m.Queue == "" && key == "" {
		key = queue
	}
	if err := ch.checkBind(access.Queue, queue, m.Exchange, key); err != nil {
		return mqError(err, m.ID())
	}
	if err := ch.c.vhost.UnbindQueue(queue, m.Exchange, key, m.Arguments, ch.c.id); err != nil {
		return mqError(err, m.ID())
	}
	ch.c.out.method(ch.id, &amqpwire.QueueUnbindOK{})
	return nil
}

func (ch *channel) queuePurge(m *amqpwire.QueuePurge) error {
	queue, err := ch.queueName(m.Queue, m.ID())
	if err != nil {
		return err
	}
	if err := ch.c.access.ReadQueue(queue); err != nil {
		return mqError(err, m.ID())
	}
	n, err := ch.c.vhost.PurgeQueue(queue, ch.c.id)
	if err != nil {
		return mqError(err, m.ID())
	}
	ch.reply(m.NoWait, &amqpwire.QueuePurgeOK{MessageCount: uint32(max(n, 0))})
	return nil
}

// queueDelete deletes a queue; its consumers (on any connection) are
// cancelled by mq, which reaches the clients as server-sent basic.cancel.
func (ch *channel) queueDelete(m *amqpwire.QueueDelete) error {
	queue, err := ch.queueName(m.Queue, m.ID())
	if err != nil {
		return err
	}
	if err := ch.c.access.Delete(access.Queue, queue); err != nil {
		return mqError(err, m.ID())
	}
	n, err := ch.c.vhost.DeleteQueue(queue, m.IfUnused, m.IfEmpty, ch.c.id)
	if err != nil {
		return mqError(err, m.ID())
	}
	ch.reply(m.NoWait, &amqpwire.QueueDeleteOK{MessageCount: uint32(max(n, 0))})
	return nil
}

// checkBind checks the user's permissions for a bind or unbind of a
// destination (a queue or an exchange) to the source exchange with key.
func (ch *channel) checkBind(destKind access.Kind, destination, source, key string) error {
	return ch.c.access.Bind(destKind, destination, source, key, func() bool { return ch.c.isTopicExchange(source) })
}
