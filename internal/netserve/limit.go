package netserve

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
)

// LimitListener returns ln capped at max open connections: a connection
// accepted while max are open is closed at once, before a byte is read or
// written, and Accept goes on to the next. Unlike waiting for a free slot
// (Kafka's max.connections, ranch's max_connections), the client learns at
// once that it was refused and the kernel's backlog does not fill with
// connections nobody will serve. The first refusal of every spell at the
// cap is logged as a warning naming the listener (name); later ones at
// debug level. max <= 0 returns ln itself: no cap.
//
// A connection's slot is given back when it is closed. Server.Serve hands
// its protocol the socket underneath (a *net.TCPConn keeps sendfile and
// its socket options) and gives the slot back when the connection ends.
func LimitListener(ln net.Listener, max int, name string, log *slog.Logger) net.Listener {
	if max <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, max: int64(max), log: log.With("listener", name, "max_connections", max)}
}

type limitListener struct {
	net.Listener
	max  int64
	log  *slog.Logger
	open atomic.Int64
	// refusing is set by a refusal and cleared by the next admission, so
	// only the first refusal of a spell at the cap is a warning.
	refusing atomic.Bool
}

// Accept returns the next connection there is room for.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			l.refusing.Store(false)
			return &limitedConn{Conn: nc, slots: &l.open}, nil
		}
		l.open.Add(-1)
		remote := nc.RemoteAddr().String()
		nc.Close()
		if l.refusing.Swap(true) {
			l.log.Debug("connection limit reached; connection closed", "remote", remote)
		} else {
			l.log.Warn("connection limit reached; closing new connections until one ends", "remote", remote)
		}
	}
}

// limitedConn is a connection holding one of its listener's slots.
type limitedConn struct {
	net.Conn
	slots   *atomic.Int64
	release sync.Once
}

// Close closes the socket and gives the slot back.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.releaseSlot()
	return err
}

func (c *limitedConn) releaseSlot() {
	c.release.Do(func() { c.slots.Add(-1) })
}

// unwrapLimited returns the socket under a connection from LimitListener
// and the function that gives its slot back; any other connection comes
// back as it is, with nothing to give back.
func unwrapLimited(nc net.Conn) (net.Conn, func()) {
	if lc, ok := nc.(*limitedConn); ok {
		return lc.Conn, lc.releaseSlot
	}
	return nc, func() {}
}
