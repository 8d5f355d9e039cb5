package amqp

import (
	"errors"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// basicPublish routes one message. Confirms and mandatory returns follow
// RabbitMQ: an unroutable mandatory message comes back with basic.return
// 312 NO_ROUTE before its confirm; an unroutable message without mandatory
// is dropped and still confirmed. In a transaction the message waits for
// tx.commit.
func (ch *channel) basicPublish(m *amqpwire.BasicPublish, content *amqpwire.Content) error {
	c := ch.c
	if m.Immediate {
		return amqpwire.Errorf(amqpwire.CodeNotImplemented, "immediate=true").In(m.ID())
	}
	if uid := content.Properties.UserID; uid != "" && uid != c.user {
		return amqpwire.Errorf(amqpwire.CodePreconditionFailed, "user_id property set to '%s' but authenticated user was '%s'",
			uid, c.user).In(m.ID())
	}
	msg := &mq.Message{
		Exchange:      m.Exchange,
		RoutingKey:    m.RoutingKey,
		Properties:    content.Properties,
		RawProperties: content.RawProperties,
		Body:          content.Body,
	}
	if err := c.access.Publish(m.Exchange, msg.RoutingKeys, func() bool { return c.isTopicExchange(m.Exchange) }); err != nil {
		return mqError(err, m.ID())
	}
	if msg.Properties.ReplyTo == mq.ReplyToQueue {
		if err := ch.directReplyTo(msg); err != nil {
			return err.In(m.ID())
		}
	}
	if err := c.waitWhileBlocked(); err != nil {
		return err
	}
	if ch.tx != nil {
		return ch.tx.publish(ch, msg, m)
	}
	res, err := c.publisher().Publish(msg)
	c.srv.alarms.checkMemory()
	if err != nil {
		var we *amqpwire.Error
		if errors.As(err, &we) && we.Code != amqpwire.CodeInternalError {
			return mqError(err, m.ID()) // e.g. 404 no exchange: closes the channel
		}
		// The store failed: with confirms the publisher hears a nack,
		// without them the message is lost as in RabbitMQ.
		c.log.Warn("publish failed", "exchange", m.Exchange, "routing_key", m.RoutingKey, "err", err)
		if ch.confirm != nil {
			ch.confirm.published(res.Durable, true)
		}
		return nil
	}
	ch.countPublished(res, m.Mandatory)
	if res.Routed == 0 && m.Mandatory {
		ch.returnMessage(msg)
	}
	if ch.confirm != nil {
		// A queue full with x-overflow reject-publish refused it: nack.
		ch.confirm.published(res.Durable, res.Rejected > 0)
	}
	if limit := c.srv.cfg.FlowBacklog; limit > 0 && res.Backlog > limit {
		c.flowPause()
	}
	return nil
}

// directReplyTo gives a request published with reply_to
// amq.rabbitmq.reply-to the name of the channel's reply consumer, which
// the responder's reply is published under (direct reply-to); without
// one it is RabbitMQ's 406.
func (ch *channel) directReplyTo(msg *mq.Message) *amqpwire.Error {
	if ch.replies == nil {
		return amqpwire.Errorf(amqpwire.CodePreconditionFailed, "fast reply consumer does not exist")
	}
	msg.Properties.ReplyTo = ch.replies.sub.Load().ReplyTo()
	msg.RawProperties = nil // encoded anew, with the name
	return nil
}

// publisher returns the connection's mq.Publisher, made by the first
// publish. Reader only.
func (c *conn) publisher() *mq.Publisher {
	if c.pub == nil {
		c.pub = c.vhost.NewPublisher()
	}
	return c.pub
}

// flushPublishes appends the stream records the connection's publisher
// holds back and starts the fsync their confirms wait for. The reader
// calls it wherever it would otherwise wait, or do something other than
// publish, so that no confirm, stream reader or later command waits on a
// batch that nothing will end. Reader only.
func (c *conn) flushPublishes() {
	if c.pub != nil && c.pub.Pending() {
		c.pub.Flush()
	}
}

// returnMessage sends an unroutable mandatory message back.
func (ch *channel) returnMessage(msg *mq.Message) {
	ch.c.out.push(outItem{
		kind:    outContent,
		channel: ch.id,
		method: &amqpwire.BasicReturn{
			ReplyCode:  amqpwire.CodeNoRoute,
			ReplyText:  "NO_ROUTE",
			Exchange:   msg.Exchange,
			RoutingKey: msg.RoutingKey,
		},
		msg: msg,
	})
}
