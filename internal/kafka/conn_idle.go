package kafka

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// A connection is idle when it has neither completed a request nor been
// written a response for Config.ConnectionsMaxIdle (Kafka's
// connections.max.idle.ms); it is then closed. Bytes of a request still
// arriving do not count: a client dribbling a request is as idle as one
// sending nothing (Kafka counts any bytes read, which lets a slow sender
// hold a connection forever).
//
// Precisely, a connection is active when its reader starts waiting for
// the next request (having read and, unless it is a pipelined produce,
// handled the last one) and when a response has been written; a request
// served for longer than ConnectionsMaxIdle (a long poll) is not idle.
//
// No timer or goroutine is added per connection: the reader's read
// deadline stays at most ConnectionsMaxIdle ahead, and each request only
// records the time (markActive). When the deadline passes, the reader
// looks at the last activity and either moves the deadline on or gives up;
// on a busy connection that happens once per ConnectionsMaxIdle.

// monoEpoch anchors monoNow: time.Since reads the monotonic clock.
var monoEpoch = time.Now()

// monoNow is monotonic time in nanoseconds, storable in an atomic.Int64.
func monoNow() int64 { return int64(time.Since(monoEpoch)) }

// errIdle ends a connection that stayed idle for ConnectionsMaxIdle.
var errIdle = errors.New("connection idle")

// markActive records that the reader starts waiting for a request, or that
// a response was written.
func (c *conn) markActive() {
	if c.maxIdle > 0 {
		c.lastActive.Store(monoNow())
	}
}

// armIdleDeadline sets the first read deadline, ConnectionsMaxIdle after
// the connection was accepted, unless the connection is already stopping.
func (c *conn) armIdleDeadline() {
	if c.maxIdle <= 0 {
		return
	}
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if !c.stopped {
		c.nc.SetReadDeadline(time.Now().Add(c.maxIdle))
	}
}

// halt makes the reader stop: a read waiting for data returns, and a
// wait for the request budget gives up. Shutdown and a writer that gave up
// on the connection call it; the idle deadline never overrides it.
func (c *conn) halt() {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if !c.stopped {
		c.stopped = true
		close(c.stop)
	}
	c.nc.SetReadDeadline(time.Now())
}

// stillActive is called when the read deadline has passed. If the
// connection was active within ConnectionsMaxIdle it moves the deadline to
// ConnectionsMaxIdle after that activity and reports true; it reports
// false if the connection is idle or halted.
func (c *conn) stillActive() bool {
	if c.maxIdle <= 0 {
		return false // only halt sets deadlines then
	}
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.stopped {
		return false
	}
	idleUntil := c.lastActive.Load() + int64(c.maxIdle)
	wait := time.Duration(idleUntil - monoNow())
	if wait <= 0 {
		return false
	}
	c.nc.SetReadDeadline(time.Now().Add(wait))
	return true
}

// readFull reads len(p) bytes as io.ReadFull does, carrying on past read
// deadlines while the connection is active. A connection found idle
// returns errIdle.
func (c *conn) readFull(p []byte) (int, error) {
	have := 0
	for {
		n, err := io.ReadFull(c.r, p[have:])
		have += n
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return have, err
		}
		if !c.stillActive() {
			return have, c.idleError(err)
		}
	}
}

// peek returns the next n buffered bytes (n at most the reader's buffer
// size) without consuming them, waiting for them as readFull does.
func (c *conn) peek(n int) ([]byte, error) {
	for {
		b, err := c.r.Peek(n)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return b, err
		}
		if !c.stillActive() {
			return b, c.idleError(err)
		}
	}
}

// idleError is what a read that hit its deadline returns: errIdle unless
// the deadline was halt's (Shutdown or the writer giving up).
func (c *conn) idleError(err error) error {
	c.stopMu.Lock()
	stopped := c.stopped
	c.stopMu.Unlock()
	if stopped || c.maxIdle <= 0 {
		return err
	}
	return fmt.Errorf("%w: no complete request and no response for %v (connections.max.idle.ms)", errIdle, c.maxIdle)
}
