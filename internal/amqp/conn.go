package amqp

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/rate"
	"github.com/wharf-mq/wharf/internal/tlsconf"
)

const (
	// closeTimeout is how long a connection waits for the peer's
	// connection.close-ok after sending connection.close.
	closeTimeout = 3 * time.Second
	// teardownWriteTimeout bounds the final flush to a peer that has stopped
	// reading.
	teardownWriteTimeout = 2 * time.Second
)

// errClientClosed ends the read loop after the client's connection.close
// (or close-ok to ours) has been handled.
var errClientClosed = errors.New("amqp: connection closed by the client")

// errAborted ends a wait inside the read loop when the connection is being
// killed (shutdown, heartbeat timeout, write failure).
var errAborted = errors.New("amqp: connection aborted")

// clientCaps are the capabilities the client announced in start-ok.
type clientCaps struct {
	blocked      bool // connection.blocked: may be sent connection.blocked/unblocked
	cancelNotify bool // consumer_cancel_notify: may be sent basic.cancel
	authFailure  bool // authentication_failure_close: gets connection.close on a failed login
}

// conn is one client connection. The goroutine running serve (the reader)
// owns the negotiation results and the channel map; the writer goroutine
// owns w; the fields marked otherwise are shared.
type conn struct {
	srv *Server
	nc  net.Conn
	id  mq.ConnID
	log *slog.Logger
	// tlsSock is what nc reads and writes when it is TLS over a
	// tlsconf.Socket (AMQPS), nil otherwise: the writer flushes in its
	// Batch.
	tlsSock *tlsconf.Socket
	// name is RabbitMQ's name of the connection, "peer -> local", by
	// which the management API lists and closes it; connectedAt is when
	// it was accepted.
	name        string
	connectedAt time.Time

	// The socket as the read buffer and the writer see it: both count
	// the bytes that pass (management API traffic statistics).
	recv trafficReader
	sent trafficWriter

	// Reader only: the read buffer, borrowed while the client sends (see
	// buffers.go), and the frame reader over it; input waits for the
	// client without a buffer (nil: the connection keeps one).
	br    *bufio.Reader
	fr    *amqpwire.FrameReader
	input *inputWaiter
	// lw is the borrowed write buffer: the handshake's, then only the
	// writer goroutine's (see writer()).
	lw  *lentWriter
	out *outbound

	// Writer goroutine only.
	writeErr       error
	deliverScratch amqpwire.BasicDeliver
	ackScratch     amqpwire.BasicAck

	// Set by the handshake, read-only afterwards.
	channelMax  uint16
	frameMax    uint32
	heartbeat   time.Duration
	user        string
	vhostName   string
	vhost       *mq.VHost
	access      *access.Principal // the user in vhost: checks every operation (reader only)
	caps        clientCaps
	clientProps amqpwire.Table       // from start-ok, as the client sent them
	mechanism   string               // the SASL mechanism the client logged in with
	tls         *tls.ConnectionState // nil: not TLS

	// Reader only; the reader changes channels under chanMu, so others
	// may read it under chanMu (openChannels).
	channels map[uint16]*channel
	chanMu   sync.Mutex
	closing  bool          // connection.close sent; waiting for close-ok
	pub      *mq.Publisher // the connection's publishes, batched; nil until the first

	// Shared.
	opened        atomic.Bool   // connection.open-ok queued; the writer goroutine runs
	framesRead    atomic.Uint64 // for the heartbeat monitor
	readPaused    atomic.Bool   // the reader waits on an alarm, not the peer
	closeSent     atomic.Bool   // connection.close queued (by the reader or Shutdown), or close-ok to the client's: nothing more may be said
	stopRequested atomic.Bool   // Shutdown asked the reader to wind down
	published     atomic.Bool   // has published at least once: gets connection.blocked
	blockedSent   bool          // connection.blocked sent and not yet unblocked; under alarms.mu
	abortOnce     sync.Once
	abort         chan struct{} // closed by kill: ends waits of the reader
	stopOnce      sync.Once
	stopping      chan struct{} // closed by forceClose: a publisher blocked by an alarm gives up
	wg            sync.WaitGroup

	trafficRates rate.Sampler // for ConnectionInfo.Traffic
}

func newConn(s *Server, nc net.Conn) *conn {
	id := mq.ConnID(connIDs.Add(1))
	c := &conn{
		srv:         s,
		nc:          nc,
		tlsSock:     tlsconf.SocketUnder(nc),
		id:          id,
		log:         s.log.With("conn", uint64(id), "remote", nc.RemoteAddr().String()),
		name:        nc.RemoteAddr().String() + " -> " + nc.LocalAddr().String(),
		connectedAt: time.Now(),
		recv:        trafficReader{nc: nc},
		sent:        trafficWriter{nc: nc},
		out:         newOutbound(s.cfg.OutboundLimit),
		channels:    make(map[uint16]*channel),
		abort:       make(chan struct{}),
		stopping:    make(chan struct{}),
	}
	c.input = newInputWaiter(c)
	c.acquireReadBuffer()
	return c
}

// serve runs the connection to its end: handshake, frame loop, teardown.
func (c *conn) serve() {
	defer c.releaseBuffers()
	defer c.nc.Close()
	defer c.kill()
	if err := c.handshake(); err != nil {
		if errors.Is(err, errClientClosed) {
			c.awaitHangUp()
		}
		c.logEnd("handshake failed", err)
		return
	}
	c.log.Debug("connection opened", "user", c.user, "vhost", c.vhostName,
		"heartbeat", c.heartbeat, "frame_max", c.frameMax, "channel_max", c.channelMax)
	err := c.readLoop()
	c.teardown()
	c.logEnd("connection closed", err)
}

func (c *conn) logEnd(msg string, err error) {
	switch {
	case err == nil || errors.Is(err, errClientClosed) || errors.Is(err, io.EOF) || c.isClosing():
		c.log.Debug(msg, "err", err)
	default:
		c.log.Info(msg, "err", err)
	}
}

// kill ends the connection from any goroutine: waits in the reader end and
// the socket closes, so blocked reads and writes return.
func (c *conn) kill() {
	c.abortOnce.Do(func() {
		close(c.abort)
		c.nc.Close()
	})
}

// isClosing reports whether the connection is being closed on purpose.
func (c *conn) isClosing() bool {
	select {
	case <-c.abort:
		return true
	default:
		return c.closeSent.Load()
	}
}

// forceClose is Shutdown's way in: connection.close 320 to an open
// connection, whose reader then waits for close-ok; a connection still
// negotiating is simply dropped. Safe from any goroutine.
func (c *conn) forceClose(reason string) {
	c.stopRequested.Store(true)
	c.stopOnce.Do(func() { close(c.stopping) })
	if !c.opened.Load() {
		c.kill()
		return
	}
	e := amqpwire.Errorf(amqpwire.CodeConnectionForced, "%s", reason)
	if c.closeSent.CompareAndSwap(false, true) {
		c.out.method(0, e.CloseMethod())
	}
	// Wake a reader waiting for frames; it then waits closeTimeout at most
	// for close-ok.
	c.nc.SetReadDeadline(time.Now().Add(closeTimeout))
}

// readLoop reads and dispatches frames until the connection ends. It
// returns nil after an orderly close.
func (c *conn) readLoop() error {
	for {
		if c.stopRequested.Load() && !c.closing {
			c.enterClosing()
		}
		f, err := c.nextFrame()
		if err != nil {
			var we *amqpwire.Error
			switch {
			case c.closing:
				return nil // the peer did not answer our close in time, or hung up
			case errors.As(err, &we):
				// A malformed frame leaves the stream unreadable: report
				// it, then discard input until the peer hangs up (or
				// closeTimeout), so closing with unread bytes does not
				// reset the connection before the peer reads our close.
				c.sendClose(we)
				c.awaitHangUp()
				return err
			default:
				return err
			}
		}
		c.framesRead.Add(1)
		if c.closing {
			if done := c.closingFrame(f); done {
				return nil
			}
			continue
		}
		if err := c.handleFrame(f); err != nil {
			if errors.Is(err, errClientClosed) {
				c.awaitHangUp()
				return nil
			}
			var we *amqpwire.Error
			if !errors.As(err, &we) {
				return err
			}
			c.sendClose(we)
			c.enterClosing()
		}
	}
}

// awaitHangUp waits for the peer to close its end of the socket, for
// closeTimeout at most, discarding whatever it still sends. After close-ok
// to the client's connection.close, closing is the client's to do, as in
// RabbitMQ: a socket closed under a client that has not yet taken in the
// close-ok makes amqp091-go report its graceful close to NotifyClose
// listeners as 501 EOF. After our connection.close for a malformed frame,
// unread input left behind would reset the connection before the peer
// has read the close.
func (c *conn) awaitHangUp() {
	c.nc.SetReadDeadline(time.Now().Add(closeTimeout))
	io.Copy(io.Discard, c.nc)
}

// sendClose queues connection.close for e (once per connection) and
// releases every channel's deliveries at once rather than after close-ok.
func (c *conn) sendClose(e *amqpwire.Error) {
	if !e.Hard {
		e = &amqpwire.Error{Code: e.Code, Text: e.Text, ClassID: e.ClassID, MethodID: e.MethodID, Hard: true}
	}
	if e.Code != amqpwire.CodeConnectionForced {
		c.log.Info("closing connection on error", "code", e.Code, "text", e.Text,
			"method", amqpwire.NewMethodID(e.ClassID, e.MethodID).String())
	}
	// Release the channels first: deliveries stop before the close goes
	// out, and a client reacting to it finds its messages requeued.
	c.closeChannels()
	if c.closeSent.CompareAndSwap(false, true) {
		c.out.method(0, e.CloseMethod())
	}
}

// enterClosing switches the reader to waiting for close-ok: further frames
// are discarded, and the wait is bounded.
func (c *conn) enterClosing() {
	c.closing = true
	c.closeChannels()
	c.nc.SetReadDeadline(time.Now().Add(closeTimeout))
}

// closingFrame handles a frame while connection.close is outstanding: only
// close-ok (or the peer's own close) matters. It reports whether the
// connection is done.
func (c *conn) closingFrame(f amqpwire.Frame) bool {
	if f.Channel != 0 || f.Type != amqpwire.FrameMethod {
		return false
	}
	id, err := amqpwire.PeekMethodID(f.Payload)
	if err != nil {
		return false
	}
	switch id {
	case amqpwire.ConnectionCloseOKID:
		return true
	case amqpwire.ConnectionCloseID:
		c.out.method(0, &amqpwire.ConnectionCloseOK{})
		return true
	}
	return false
}

// handleFrame dispatches one frame of an open connection. Hard errors come
// back as *amqpwire.Error; soft ones are handled by closing the channel.
func (c *conn) handleFrame(f amqpwire.Frame) error {
	if f.Type == amqpwire.FrameHeartbeat {
		return nil
	}
	if f.Channel == 0 {
		return c.handleConnectionFrame(f)
	}
	ch := c.channels[f.Channel]
	if ch == nil {
		return c.openChannel(f)
	}
	if !ch.closing && ch.closedAsync.Load() {
		ch.enterClosing()
	}
	if ch.closing {
		ch.closingFrame(f)
		return nil
	}
	cmd, complete, err := ch.asm.Add(f)
	if err == nil && complete {
		started := time.Now()
		err = ch.handle(cmd)
		c.srv.observe(cmd.Method, started)
	}
	if err != nil {
		return ch.fail(err)
	}
	return nil
}

// closeChannels tears every channel down: consumers are cancelled and
// unacknowledged deliveries go back to their queues.
func (c *conn) closeChannels() {
	for _, ch := range c.channels {
		ch.teardown()
	}
}

// release gives back what the connection holds in the broker: the
// publishes the client made are kept (confirmed or not), every channel is
// closed with its unacknowledged deliveries requeued, and the exclusive
// queues are deleted. Reader only; a second call finds nothing to do.
func (c *conn) release() {
	c.flushPublishes()
	c.closeChannels()
	if c.vhost != nil {
		c.vhost.ConnectionClosed(c.id)
	}
}

// teardown releases everything the connection holds once its reader is
// done: channels, exclusive queues, the writer and confirm goroutines.
func (c *conn) teardown() {
	c.release()
	c.srv.alarms.forget(c)
	c.out.stop()
	// The final flush (close-ok, say) must not hang on a peer that no
	// longer reads.
	c.nc.SetWriteDeadline(time.Now().Add(teardownWriteTimeout))
	c.wg.Wait()
}

// startWriter starts the writer goroutine; from now on only it writes.
func (c *conn) startWriter() {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.writeLoop()
	}()
}
