package kafka

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
)

// handshakeTLS completes the TLS handshake of a connection on a TLS
// listener before its first request, under the idle deadline, so that a
// client that fails it (a plaintext client, an untrusted or missing
// client certificate) is logged as such. It reports whether the
// connection may go on; on other listeners it does nothing.
func (c *conn) handshakeTLS() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	err := tc.Handshake()
	switch {
	case err == nil:
		c.tlsPrincipal(tc.ConnectionState())
		return true
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		// A client that connects and leaves (a port probe).
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Debug("closing connection: no TLS handshake", "listener", c.listener.Name(), "err", c.idleError(err))
	default:
		// Kafka logs a failed SSL handshake as a failed authentication.
		c.log.Info("failed authentication: TLS handshake failed", "listener", c.listener.Name(), "err", err)
	}
	return false
}
