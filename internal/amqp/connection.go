package amqp

import (
	"github.com/wharf-mq/wharf/internal/amqp/wire"
)

// handleConnectionFrame handles a frame on channel 0 of an open connection:
// only connection-class methods belong there.
func (c *conn) handleConnectionFrame(f wire.Frame) error {
	c.flushPublishes() // connection.close and the like come after the publishes before them
	if f.Type != wire.FrameMethod {
		return wire.Errorf(wire.CodeUnexpectedFrame, "%s frame on channel 0", f.Type)
	}
	m, err := wire.DecodeMethod(f.Payload)
	if err != nil {
		return err
	}
	switch m := m.(type) {
	case *wire.ConnectionClose:
		c.log.Debug("client closed the connection", "code", m.ReplyCode, "text", m.ReplyText)
		// As RabbitMQ, everything is released before close-ok: a client
		// that reconnects at once finds its exclusive queues gone.
		c.release()
		c.closeSent.Store(true)
		c.out.method(0, &wire.ConnectionCloseOK{})
		c.out.stop() // nothing may follow close-ok, not even a heartbeat
		return errClientClosed
	case *wire.ConnectionCloseOK:
		// Only valid in reply to our close, which the closing state
		// handles; a stray one still means the client is gone.
		return errClientClosed
	case *wire.ConnectionBlocked, *wire.ConnectionUnblocked:
		// Client-to-server flow notifications carry no obligation.
		return nil
	case *wire.ConnectionUpdateSecret:
		// There are no expiring credentials to refresh: accept.
		c.out.method(0, &wire.ConnectionUpdateSecretOK{})
		return nil
	}
	if m.ID().Class() == wire.ClassConnection {
		return wire.Errorf(wire.CodeChannelError, "unexpected method in connection state running: %s", m.Name()).In(m.ID())
	}
	return wire.Errorf(wire.CodeCommandInvalid, "%s is not allowed on channel 0", m.Name()).In(m.ID())
}
