package kafka

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/authlimit"
	"github.com/wharf-mq/wharf/internal/tlsconf"
)

// conn serves one client connection.
//
// Kafka answers the requests of one connection strictly in the order they
// were sent. Two goroutines share the work: the connection's own (serve,
// reading and dispatching requests) and a writer (writeLoop) that writes
// the responses in that same order.
//
// Produce requests that expect an answer (acks != 0) are pipelined: each is
// handled on a goroutine of its own as soon as it is read, so reading the
// next request, and appending it to other partitions, overlaps the fsync an
// acks=all request waits for. Clients that keep several produce requests in
// flight (librdkafka, sarama, the Java client, franz-go when idempotent or
// told to) gain. Appends to any one partition still happen in request order
// (produceOrder, 00_produce.go), so the records of one connection land as
// they were sent and idempotent sequence numbers arrive in order.
//
// Every other request is handled as Kafka handles all of them: alone. The
// reader waits until every earlier response has been written, handles the
// request itself and reads on only afterwards; so an admin request, a fetch
// or a metadata request sees the effects of every request sent before it,
// and an acks=0 produce (whose failure closes the connection, cutting off
// what follows) never runs ahead.
//
// Requests read but not yet answered are bounded by maxInFlight and
// maxInFlightBytes (at least one is always admitted, however large), and
// across connections by the server's request budget (request_budget.go).
// A connection idle for Config.ConnectionsMaxIdle is closed (conn_idle.go).
type conn struct {
	s        *Server
	listener *Listener // the listener that accepted it
	nc       net.Conn  // a *tls.Conn on a TLS listener
	raw      net.Conn  // the socket under nc, which Kill closes without a TLS alert
	// tlsSock is what nc reads and writes on a TLS listener, nil on
	// others: a response of many TLS records is written in its Batch.
	tlsSock  *tlsconf.Socket
	r        *bufio.Reader
	remote   string
	remoteIP string // for ACL hosts and the failed-login limiter
	log      *slog.Logger
	wbuf     []byte // reused response encoding buffer; the writer's only
	clientID string // of the last request read, for log lines; the reader's only

	inflight inflight
	order    produceOrder // the reader's only
	auth     authState    // the reader's only (conn_auth.go)

	// ended is set when the writer gave up on the connection (a failed
	// write, or a request that closes it): the reader stops, quietly.
	ended atomic.Bool

	// mutedUntil (monoNow) is when a quota throttle ends: the reader
	// serves no request before it (conn_quota.go).
	mutedUntil atomic.Int64

	// Idle expiry and stopping (conn_idle.go). stop is closed, under
	// stopMu with stopped set, when the reader must stop: Shutdown, or
	// the writer giving up.
	maxIdle    time.Duration // <= 0: never
	lastActive atomic.Int64  // monoNow when the reader last started waiting, or a response was written
	stopMu     sync.Mutex
	stopped    bool
	stop       chan struct{}
}

const (
	// maxInFlight bounds the requests one connection may have read but
	// not yet answered: franz-go and sarama keep up to 5 produce requests
	// in flight, librdkafka more.
	maxInFlight = 8
	// maxInFlightBytes bounds the request frames those hold.
	maxInFlightBytes = 64 << 20
	// readBufferSize is the connection's read buffer: enough for the
	// size prefix and header of a request, and for whole small requests
	// read several at a time. Larger frames are read straight into their
	// own buffers (bufio reads past its buffer when it is empty), so a
	// bigger buffer would only cost memory on every idle connection.
	readBufferSize = 4 << 10
)

func newConn(s *Server, nc net.Conn, l *Listener) *conn {
	remote := nc.RemoteAddr().String()
	raw := nc
	var tlsSock *tlsconf.Socket
	if l.TLS != nil {
		nc, tlsSock = tlsconf.Server(nc, l.TLS)
	}
	c := &conn{
		s:        s,
		listener: l,
		nc:       nc,
		raw:      raw,
		tlsSock:  tlsSock,
		r:        bufio.NewReaderSize(nc, readBufferSize),
		remote:   remote,
		remoteIP: authlimit.RemoteIP(nc.RemoteAddr()),
		log:      s.log.With("remote", remote),
		auth:     newAuthState(l),
		maxIdle:  s.cfg.ConnectionsMaxIdle,
		stop:     make(chan struct{}),
	}
	c.inflight.init(maxInFlight, maxInFlightBytes)
	c.markActive() // idle from the moment it is accepted
	return c
}

// request is one decoded client request.
type request struct {
	header   requestHeader
	msg      kmsg.Request
	received time.Time
	conn     *conn
	// principal is who the connection had authenticated as when the
	// request was read (conn_auth.go).
	principal string
	// waited is time the handler spent waiting rather than working (a
	// fetch's long poll, a rebalance), which the request quota does not
	// count.
	waited time.Duration
}

// response is what a handler hands back to its connection.
type response struct {
	msg kmsg.Response // nil: nothing is written (acks=0 produce)

	// fetch carries the file ranges a Fetch response's record batches come
	// from; the connection writes them and releases them.
	fetch *fetchData

	// closeConn closes the connection after the (possibly empty) response:
	// Kafka does so after an acks=0 produce that failed, the only way such
	// a producer learns to refresh its metadata.
	closeConn bool

	// raw, when msg is nil, is written as a bare size-prefixed frame:
	// a SASL token after SaslHandshake v0.
	raw []byte
}

// exchange is one request on its way from the reader to the writer.
type exchange struct {
	correlationID int32
	frameSize     int64 // charged to the connection's in-flight bounds
	budgeted      int64 // charged to the server's request budget

	// frame is returned to the frame pool once the response is written;
	// nil when the request's decoded form may still point into it.
	frame []byte

	// done is closed when resp and closeAfter are final.
	done chan struct{}
	resp *response // nil: nothing to write

	// closeAfter ends the connection once resp (if any) is written: the
	// request could not be served, or its handler says so.
	closeAfter bool

	// apiKey and received (zero: not decoded) time the request (observe.go).
	apiKey   int16
	received time.Time
}

// stopReading interrupts a read that is waiting for the next request; a
// request being handled still completes and gets its response. Called
// once for every connection when Shutdown starts.
func (c *conn) stopReading() {
	c.halt()
}

// serve runs the connection until the client goes away, a request cannot
// be served, the connection is idle too long, or the server shuts down.
// Every request it read is answered (or, on a broken connection, at least
// finished) before it returns.
func (c *conn) serve() {
	defer c.nc.Close()
	c.armIdleDeadline()
	if !c.handshakeTLS() {
		return
	}
	queue := make(chan *exchange, maxInFlight)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop(queue)
	}()
	if err := c.readLoop(queue); errors.Is(err, errIdle) {
		// No response was written for ConnectionsMaxIdle either: one
		// still being written waits on a client that does not read.
		c.nc.SetWriteDeadline(time.Now())
	}
	close(queue)
	<-writerDone
}

// readLoop reads and dispatches requests until the connection must stop,
// and returns the read error that stopped it, if one did.
func (c *conn) readLoop(queue chan<- *exchange) error {
	for !c.s.isClosing() && !c.ended.Load() {
		// Idle from now, when the connection waits for its next
		// request: a request handled here, however long, is not.
		c.markActive()
		frame, err := c.readRequest()
		if frame == nil {
			return err
		}
		size := int64(len(frame))
		if !c.waitUnmuted() {
			c.inflight.release(size)
			putFrameBuf(frame)
			return nil
		}
		decodeCharge, ok := c.admit(frame)
		if !ok {
			c.inflight.release(size)
			putFrameBuf(frame)
			return nil
		}
		ex := c.dispatch(frame, decodeCharge)
		ex.budgeted = size
		queue <- ex
		if ex.closeAfter {
			return nil // known at once: nothing more is read
		}
	}
	return nil
}

// readRequest reads the next request frame, charged to the connection's
// in-flight bounds. It returns nil when the connection must stop, with the
// read error (logged) if one is the reason.
func (c *conn) readRequest() ([]byte, error) {
	size, err := c.readSize()
	if err == nil {
		err = c.checkSize(size)
	}
	if err != nil {
		c.logReadError(err)
		return nil, err
	}
	if !c.inflight.acquire(size, &c.ended) {
		return nil, nil
	}
	frame, err := c.readFrame(int(size))
	if err != nil {
		c.inflight.release(size)
		c.logReadError(err)
		return nil, err
	}
	return frame, nil
}

// admit charges frame, and what decoding it may allocate, to the server's
// request budget, waiting for room. It returns false, charging nothing,
// when the request is refused (logged) or the connection stops meanwhile.
func (c *conn) admit(frame []byte) (decodeCharge int64, ok bool) {
	decodeCharge, err := decodeCost(frame)
	if err != nil {
		hdr, _ := peekRequestHeader(frame)
		c.log.Info("closing connection: request refused before decoding", "err", err,
			"api_key", hdr.key, "version", hdr.version, "client_id", hdr.clientID)
		return 0, false
	}
	return decodeCharge, c.s.budget.acquire(int64(len(frame))+decodeCharge, c.stop)
}

// dispatch decodes frame and starts handling it: a pipelined produce on a
// goroutine of its own, anything else right here once the connection is
// otherwise idle. The returned exchange is done except for a pipelined
// produce, and its closeAfter is final if set. decodeCharge, which the
// caller charged to the request budget for decoding, is returned as soon
// as kmsg is done.
func (c *conn) dispatch(frame []byte, decodeCharge int64) *exchange {
	if c.auth.rawTokens {
		c.s.budget.release(decodeCharge)
		return c.dispatchRawSASLToken(frame)
	}
	received := time.Now()
	hdr, msg, err := decodeRequest(frame)
	c.s.budget.release(decodeCharge)
	c.clientID = hdr.clientID
	ex := &exchange{correlationID: hdr.correlationID, frameSize: int64(len(frame)), done: make(chan struct{})}
	if err == nil {
		err = c.admitBeforeAuthentication(hdr)
	}
	switch {
	case errors.Is(err, errUnsupportedApiVersions):
		c.log.Debug("ApiVersions at an unsupported version; answering with v0 UNSUPPORTED_VERSION",
			"version", hdr.version, "client_id", hdr.clientID)
		ex.resp = &response{msg: unsupportedApiVersionsResponse()}
		close(ex.done)
		return ex
	case err != nil:
		c.log.Info("closing connection: bad request", "err", err,
			"api_key", hdr.key, "version", hdr.version, "client_id", hdr.clientID)
		ex.closeAfter = true
		close(ex.done)
		return ex
	}

	ex.apiKey, ex.received = hdr.key, received
	r := &request{header: hdr, msg: msg, received: received, conn: c, principal: c.auth.principal}
	if produce, ok := msg.(*kmsg.ProduceRequest); ok {
		// A produce request's decoded form points into the frame only
		// for its records, which nothing keeps after the append.
		ex.frame = frame
		if produce.Acks != 0 {
			c.startPipelinedProduce(ex, r, produce)
			return ex
		}
	}
	c.inflight.waitAlone()
	c.order.reset() // nothing is in flight: forget the finished appends
	c.handle(ex, r)
	return ex
}

// dispatchRawSASLToken handles a bare SASL token (after SaslHandshake v0)
// once the connection is otherwise idle.
func (c *conn) dispatchRawSASLToken(frame []byte) *exchange {
	// The token is copied out of the frame as it is read, so the frame
	// goes back to the pool with the answer.
	ex := &exchange{frameSize: int64(len(frame)), frame: frame, done: make(chan struct{})}
	defer close(ex.done)
	c.inflight.waitAlone()
	var ok bool
	ex.resp, ok = c.rawSASLToken(frame)
	ex.closeAfter = !ok
	return ex
}

// startPipelinedProduce resolves and sequences a produce request here, in
// request order, and runs its appends on a new goroutine. The goroutine
// ends when the appends do; the writer waits for it through ex.done.
func (c *conn) startPipelinedProduce(ex *exchange, r *request, req *kmsg.ProduceRequest) {
	var plan *producePlan
	if !c.recoverPanic(ex, r.header, func() { plan = c.s.planProduce(r, req) }) {
		close(ex.done)
		return
	}
	c.order.sequence(plan)
	go func() {
		defer close(ex.done)
		if c.recoverPanic(ex, r.header, plan.run) {
			ex.resp = plan.response()
			c.applyQuotas(r, ex.resp, ex.frameSize)
		}
	}()
}

// handle runs r's handler and completes ex with its answer.
func (c *conn) handle(ex *exchange, r *request) {
	defer close(ex.done)
	c.recoverPanic(ex, r.header, func() {
		resp, err := c.s.handle(r)
		if err != nil {
			c.log.Info("closing connection: request failed", "err", err,
				"api_key", r.header.key, "version", r.header.version, "client_id", r.header.clientID)
			ex.closeAfter = true
			return
		}
		ex.resp = resp
		ex.closeAfter = resp.closeConn
		c.applyQuotas(r, resp, ex.frameSize)
	})
}

// recoverPanic runs fn; a panic is logged and closes the connection once
// the earlier responses are written. It reports whether fn returned.
func (c *conn) recoverPanic(ex *exchange, hdr requestHeader, fn func()) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("panic while serving a request; closing the connection",
				"panic", v, "api_key", hdr.key, "version", hdr.version, "stack", string(debug.Stack()))
			ex.resp, ex.closeAfter, ok = nil, true, false
		}
	}()
	fn()
	return true
}

// serveFrame handles one request frame (the bytes after the size prefix)
// and writes its answer, without pipelining. It returns false when the
// connection must close.
func (c *conn) serveFrame(frame []byte) (keepOpen bool) {
	c.inflight.acquire(int64(len(frame)), &c.ended)
	ex := c.dispatch(frame, 0)
	ex.frame = nil // the caller's buffer, not the pool's
	<-ex.done
	return c.finish(ex, true)
}

// writeLoop writes the answers of the exchanges in queue order, each once
// it is done, until the reader closes the queue. After a failed write or a
// request that ends the connection it stops writing but still waits for
// every exchange, so no handler outlives the connection.
func (c *conn) writeLoop(queue <-chan *exchange) {
	writing := true
	for ex := range queue {
		<-ex.done
		if !c.finish(ex, writing) {
			writing = false
			c.end()
		}
	}
}

// finish writes ex's answer if write is set, releases what ex holds, and
// reports whether the connection stays usable.
func (c *conn) finish(ex *exchange, write bool) (keepOpen bool) {
	defer c.s.budget.release(ex.budgeted)
	defer c.inflight.release(ex.frameSize)
	defer putFrameBuf(ex.frame)
	resp := ex.resp
	if !write {
		if resp != nil && resp.fetch != nil {
			resp.fetch.release()
		}
		return false
	}
	if resp != nil {
		var err error
		switch {
		case resp.msg != nil:
			err = c.write(ex.correlationID, resp.msg, resp.fetch)
		case resp.raw != nil:
			err = c.writeRaw(resp.raw)
		case resp.fetch != nil:
			resp.fetch.release()
		}
		if err != nil {
			c.logWriteError(err)
			return false
		}
		if resp.msg != nil || resp.raw != nil {
			c.markActive()
		}
	}
	c.s.observe(ex)
	return !ex.closeAfter
}

// end stops the reader after the writer gave up on the connection.
func (c *conn) end() {
	c.ended.Store(true)
	c.inflight.wake()
	c.halt()
}

// readSize reads a request's size prefix.
func (c *conn) readSize() (int64, error) {
	var prefix [4]byte
	if _, err := c.readFull(prefix[:]); err != nil {
		return 0, err
	}
	return int64(int32(binary.BigEndian.Uint32(prefix[:]))), nil
}

// errRequestTooLarge is a size prefix over the request's limit, or
// negative: Kafka closes such connections.
var errRequestTooLarge = errors.New("request too large")

// checkSize applies the request size limits before the frame is read:
// MaxRequestBytes (socket.request.max.bytes) to every request, and
// MaxNonProduceRequestBytes to all but Produce, whose API key it waits for
// when the size needs it. The error names what the client sent of the
// request header, for the log line.
func (c *conn) checkSize(size int64) error {
	if !c.authenticated() && size > maxUnauthenticatedRequest {
		return fmt.Errorf("%w: size %d before SASL authentication, limit %d", errRequestTooLarge, size, maxUnauthenticatedRequest)
	}
	limit := int64(c.s.cfg.MaxRequestBytes)
	if size > int64(c.s.cfg.MaxNonProduceRequestBytes) && size <= limit {
		// Only a produce request may be this large.
		key, err := c.peek(2)
		if err != nil {
			return unexpectedEOF(err)
		}
		limit = int64(c.s.requestLimit(int16(binary.BigEndian.Uint16(key))))
	}
	if size >= 0 && size <= limit {
		return nil
	}
	// Name the request and client from what was already sent, without
	// waiting for more.
	seen, _ := c.r.Peek(min(c.r.Buffered(), int(max(size, 0))))
	if len(seen) < 4 {
		return fmt.Errorf("%w: size %d, limit %d", errRequestTooLarge, size, limit)
	}
	hdr, complete := peekRequestHeader(seen)
	client := "an unknown client_id"
	if complete {
		client = fmt.Sprintf("client_id %q", hdr.clientID)
	}
	return fmt.Errorf("%w: size %d, limit %d for api key %d (%s) v%d from %s",
		errRequestTooLarge, size, limit, hdr.key, kmsg.NameForKey(hdr.key), hdr.version, client)
}

// readFrame reads the size bytes of a request after its prefix into a
// buffer from the frame pool (frame_pool.go). The buffer grows by doubling
// as the bytes arrive, from frameStart, so a client announcing a large
// request and sending little of it pins little; while the server's
// up-front allowance has room, up to frameUpFront bytes are taken whole at
// once instead, which saves the copies.
func (c *conn) readFrame(size int) ([]byte, error) {
	start := min(size, frameStart)
	if upFront := min(size, frameUpFront); upFront > start && c.s.upFront.tryAcquire(int64(upFront)) {
		defer c.s.upFront.release(int64(upFront))
		start = upFront
	}
	buf := getFrameBuf(start)
	have := 0
	for {
		n, err := c.readFull(buf[have:])
		have += n
		if err != nil {
			putFrameBuf(buf)
			return nil, unexpectedEOF(err)
		}
		if have == size {
			return buf, nil
		}
		bigger := getFrameBuf(min(size, 2*len(buf)))
		copy(bigger, buf[:have])
		putFrameBuf(buf)
		buf = bigger
	}
}

// unexpectedEOF reports a connection that ended inside a frame.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// write encodes msg with a response header and writes it. Fetch responses
// with record data (fd non-nil) go through writeFetch, which splices the
// file ranges in; fd is released either way.
func (c *conn) write(correlationID int32, msg kmsg.Response, fd *fetchData) error {
	if fd != nil {
		defer fd.release()
		if fd.hasData() {
			return c.batched(func() error { return c.writeFetch(correlationID, msg, fd) })
		}
	}
	c.wbuf = appendResponse(c.wbuf[:0], correlationID, msg)
	_, err := c.nc.Write(c.wbuf)
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil // do not pin a large buffer to an idle connection
	}
	return err
}

// batched runs write, which writes one response of many TLS records, so
// that the records leave in few large writes (tlsconf.Socket).
func (c *conn) batched(write func() error) error {
	if c.tlsSock == nil {
		return write()
	}
	return c.tlsSock.Batch(write)
}

// writeRaw writes a bare size-prefixed frame.
func (c *conn) writeRaw(payload []byte) error {
	c.wbuf = binary.BigEndian.AppendUint32(c.wbuf[:0], uint32(len(payload)))
	c.wbuf = append(c.wbuf, payload...)
	_, err := c.nc.Write(c.wbuf)
	return err
}

// appendResponse appends the size prefix, the response header and msg.
func appendResponse(dst []byte, correlationID int32, msg kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // size, set below
	dst = appendResponseHeader(dst, correlationID, msg)
	dst = msg.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// appendResponseHeader appends the response header: the correlation ID and,
// for flexible versions (header v1), an empty tagged-field section.
// ApiVersions always uses header v0 so that a client that does not yet know
// what the broker speaks can parse it.
func appendResponseHeader(dst []byte, correlationID int32, msg kmsg.Response) []byte {
	dst = kbin.AppendInt32(dst, correlationID)
	if msg.IsFlexible() && msg.Key() != int16(kmsg.ApiVersions) {
		dst = append(dst, 0)
	}
	return dst
}

func (c *conn) logReadError(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return // the client hung up between requests
	case errors.Is(err, os.ErrDeadlineExceeded) && (c.s.isClosing() || c.ended.Load()):
		return // Shutdown, or the writer ending the connection, interrupted the read
	case errors.Is(err, errIdle):
		// Routine (Kafka logs it at debug too): clients reconnect.
		c.log.Debug("closing idle connection", "err", err, "last_client_id", c.clientID)
		return
	}
	if c.clientID == "" {
		c.log.Info("closing connection", "err", err)
		return
	}
	c.log.Info("closing connection", "err", err, "last_client_id", c.clientID)
}

func (c *conn) logWriteError(err error) {
	if errors.Is(err, net.ErrClosed) {
		return
	}
	c.log.Debug("writing response failed", "err", err)
}
