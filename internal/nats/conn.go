package nats

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/subjects"
)

// Read buffer sizes: a connection starts small and grows while its reads
// fill the buffer, up to readBufferMax, and shrinks back when they stop.
const (
	readBufferMin = 4 << 10
	readBufferMax = 64 << 10
)

// conn is one client connection. Its reader goroutine (serve) parses the
// client's input and runs each operation; its writer goroutine
// (writeLoop) writes what out holds and runs the ping and authentication
// timers. serve starts the writer and waits for it.
type conn struct {
	srv *Server
	nc  net.Conn
	id  uint64
	log *slog.Logger

	// Reader-only state.
	parser          parser
	opts            connectOptions
	connected       bool // a CONNECT was accepted
	sentConnectInfo bool // the INFO that follows the first PONG was sent
	cache           subjects.Cache
	pubMsg          subjects.Message // reused for every publish
	// toFlush are the connections given messages during the current
	// read; their writers are woken once it is parsed, so that a burst
	// of small messages goes out in few writes.
	toFlush []*conn
	// stallLeft is how long publishes of the current read may still
	// wait for slow subscribers.
	stallLeft time.Duration

	// Read by the goroutines of other connections too.
	echo          atomic.Bool
	headers       atomic.Bool
	authenticated atomic.Bool
	heardFrom     atomic.Bool  // the client sent something since the last ping tick
	pingsOut      atomic.Int32 // PINGs sent without a PONG back

	subsMu sync.Mutex
	subs   map[string]*subscription // by sid; nil once closed

	out        outbound
	writerDone chan struct{}
}

func newConn(s *Server, nc net.Conn) *conn {
	id := s.clients.Add(1)
	c := &conn{
		srv:        s,
		nc:         nc,
		id:         id,
		log:        s.log.With("client", id, "remote", nc.RemoteAddr().String()),
		parser:     parser{maxControlLine: s.cfg.MaxControlLine},
		opts:       defaultConnectOptions,
		subs:       make(map[string]*subscription),
		out:        newOutbound(s.cfg.MaxPending),
		writerDone: make(chan struct{}),
	}
	c.echo.Store(c.opts.Echo)
	c.pubMsg.Source = c
	return c
}

// closeMode says whether a closing connection first writes what is
// queued for it.
type closeMode bool

const (
	closeFlush closeMode = true  // protocol errors, shutdown: the client gets the -ERR
	closeNow   closeMode = false // the client is gone or too slow: drop its backlog
)

// serve runs the connection until it closes.
func (c *conn) serve() {
	go c.writeLoop()
	defer func() { <-c.writerDone }()
	c.log.Debug("client connected")
	c.queue(infoLine(c.srv.info(c.nc.LocalAddr(), c.nc.RemoteAddr(), c.id)))

	buf := make([]byte, readBufferMin)
	smallReads := 0
	for {
		n, err := c.nc.Read(buf)
		if n > 0 {
			c.heardFrom.Store(true)
			c.stallLeft = stallTotal
			perr := c.parser.parse(buf[:n], c)
			c.flushTargets()
			if perr != nil {
				c.fail(perr)
				return
			}
			switch {
			case n == len(buf) && len(buf) < readBufferMax:
				buf, smallReads = make([]byte, 2*len(buf)), 0
			case n < len(buf)/4 && len(buf) > readBufferMin:
				if smallReads++; smallReads > 16 {
					buf, smallReads = make([]byte, len(buf)/2), 0
				}
			}
		}
		if err != nil {
			c.log.Debug("client closed", "err", err)
			c.close(closeNow)
			return
		}
	}
}

// fail ends the connection for err, telling the client why when
// nats-server would.
func (c *conn) fail(err error) {
	var ce *closeError
	if !errors.As(err, &ce) {
		c.log.Warn("closing client", "err", err)
		c.close(closeNow)
		return
	}
	c.log.Debug("closing client", "reason", ce.Error())
	if ce.reply != "" {
		c.sendErr(ce.reply)
	}
	c.close(closeFlush)
}

// close ends the connection: its subscriptions are removed at once; the
// writer then writes what is queued (closeFlush) or not (closeNow) and
// closes the socket. Only the first call counts.
func (c *conn) close(mode closeMode) {
	if !c.out.shut(mode == closeFlush) {
		return
	}
	c.subsMu.Lock()
	subs := c.subs
	c.subs = nil
	c.subsMu.Unlock()
	for _, s := range subs {
		c.srv.router.Unsubscribe(s.route)
	}
	if mode == closeNow {
		c.nc.Close() // unblocks a write in progress too
	}
}

// queue appends a protocol line for the client and wakes the writer.
func (c *conn) queue(b []byte) {
	if c.out.queue(b) {
		c.slowConsumer()
		return
	}
	c.out.signal()
}

func (c *conn) sendErr(text string) { c.queue(errLine(text)) }

var (
	okLine   = []byte("+OK\r\n")
	pingLine = []byte("PING\r\n")
	pongLine = []byte("PONG\r\n")
)

func (c *conn) sendOK() { c.queue(okLine) }

// slowConsumer cuts off a client whose backlog passed MaxPending, dropping
// the backlog, as nats-server does (it sends nothing: the backlog stands
// between any -ERR and the client).
func (c *conn) slowConsumer() {
	c.log.Warn("slow consumer detected: max pending exceeded; closing", "max_pending", c.out.limit)
	c.close(closeNow)
}

// beforeOp refuses everything but CONNECT until an authenticating
// CONNECT was accepted.
func (c *conn) beforeOp(isConnect bool) error {
	if !isConnect && !c.connected && c.srv.cfg.authRequired() {
		return errAuthViolation
	}
	return nil
}

func (c *conn) connect(arg []byte) error {
	// Fields the JSON leaves out keep their value: nats-server's
	// defaults, or what an earlier CONNECT said.
	opts := c.opts
	if err := json.Unmarshal(arg, &opts); err != nil {
		return errProtocol
	}
	authenticated := c.srv.authenticate(&opts)
	opts.Pass, opts.Token = "", "" // not kept once checked
	c.opts = opts
	c.headers.Store(opts.Headers)
	c.echo.Store(opts.Echo)
	if !authenticated {
		return errAuthViolation
	}
	c.connected = true
	c.authenticated.Store(true)
	if opts.Protocol < 0 || opts.Protocol > 1 {
		return errBadProtocol
	}
	if opts.NoResponders && !opts.Headers {
		return errNoRespondersHd
	}
	if opts.Verbose {
		c.sendOK()
	}
	c.log.Debug("client connect", "name", opts.Name, "lang", opts.Lang, "version", opts.Version)
	return nil
}

func (c *conn) ping() error {
	c.queue(pongLine)
	// nats-server follows the first PONG after CONNECT with an INFO
	// telling a protocol 1 client it is connected.
	if c.connected && !c.sentConnectInfo && c.opts.Protocol >= 1 {
		c.sentConnectInfo = true
		info := c.srv.info(c.nc.LocalAddr(), c.nc.RemoteAddr(), c.id)
		info.ConnectInfo, info.RemoteAccount = true, "$G"
		c.queue(infoLine(info))
	}
	return nil
}

func (c *conn) pong() { c.pingsOut.Store(0) }

func (c *conn) clientErr(arg []byte) error {
	c.log.Debug("client sent -ERR", "err", string(arg))
	return errProtocol
}
