package amqp

import (
	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// handleConnectionFrame handles a frame on channel 0 of an open connection:
// only connection-class methods belong there.
func (c *conn) handleConnectionFrame(f amqpwire.Frame) error {
	c.flushPublishes() // connection.close and the like come after the publishes before them
	if f.Type != amqpwire.FrameMethod {
		return amqpwire.Errorf(amqpwire.CodeUnexpectedFrame, "%s frame on channel 0", f.Type)
	}
	m, err := amqpwire.DecodeMethod(f.Payload)
	if err != nil {
		return err
	}
	switch m := m.(type) {
	case *amqpwire.ConnectionClose:
		c.log.Debug("client closed the connection", "code", m.ReplyCode, "text", m.ReplyText)
		// As RabbitMQ, everything is released before close-ok: a client
		// that reconnects at once finds its exclusive queues gone.
		c.release()
		c.closeSent.Store(true)
		c.out.method(0, &amqpwire.ConnectionCloseOK{})
		c.out.stop() // nothing may follow close-ok, not even a heartbeat
		return errClientClosed
	case *amqpwire.ConnectionCloseOK:
		// Only valid in reply to our close, which the closing state
		// handles; a stray one still means the client is gone.
		return errClientClosed
	case *amqpwire.ConnectionBlocked, *amqpwire.ConnectionUnblocked:
		// Client-to-server flow notifications carry no obligation.
		return nil
	case *amqpwire.ConnectionUpdateSecret:
		// There are no expiring credentials to refresh: accept.
		c.out.method(0, &amqpwire.ConnectionUpdateSecretOK{})
		return nil
	}
	if m.ID().Class() == amqpwire.ClassConnection {
		return amqpwire.Errorf(amqpwire.CodeChannelError, "unexpected method in connection state running: %s", m.Name()).In(m.ID())
	}
	return amqpwire.Errorf(amqpwire.CodeCommandInvalid, "%s is not allowed on channel 0", m.Name()).In(m.ID())
}
