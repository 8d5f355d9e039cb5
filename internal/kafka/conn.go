package kafka

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn serves one client connection. Kafka answers the requests of one
// connection strictly in order and handles them one at a time (the broker
// "mutes" a channel while a request is in flight), so one goroutine reads a
// request, handles it and writes its response before reading the next.
// Different connections are served concurrently.
type conn struct {
	s      *Server
	nc     net.Conn
	r      *bufio.Reader
	remote string
	log    *slog.Logger
	wbuf   []byte // reused response encoding buffer
}

func newConn(s *Server, nc net.Conn) *conn {
	remote := nc.RemoteAddr().String()
	return &conn{
		s:      s,
		nc:     nc,
		r:      bufio.NewReaderSize(nc, 64<<10),
		remote: remote,
		log:    s.log.With("remote", remote),
	}
}

// request is one decoded client request.
type request struct {
	header   requestHeader
	msg      kmsg.Request
	received time.Time
	conn     *conn
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
}

// stopReading interrupts a read that is waiting for the next request; a
// request being handled still completes and gets its response. Called by
// Shutdown with s.mu held.
func (c *conn) stopReading() {
	c.nc.SetReadDeadline(time.Now())
}

// serve runs the connection until the client goes away, a request cannot
// be served, or the server shuts down.
func (c *conn) serve() {
	defer c.nc.Close()
	for !c.s.isClosing() {
		frame, err := c.readFrame()
		if err != nil {
			c.logReadError(err)
			return
		}
		if !c.serveFrame(frame) {
			return
		}
	}
}

// serveFrame decodes, handles and answers one request frame (the bytes
// after the size prefix). It returns false when the connection must close.
func (c *conn) serveFrame(frame []byte) (keepOpen bool) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("panic while serving a request; closing the connection",
				"panic", v, "stack", string(debug.Stack()))
			keepOpen = false
		}
	}()
	received := time.Now()
	hdr, msg, err := decodeRequest(frame)
	switch {
	case errors.Is(err, errUnsupportedApiVersions):
		c.log.Debug("ApiVersions at an unsupported version; answering with v0 UNSUPPORTED_VERSION",
			"version", hdr.version, "client_id", hdr.clientID)
		return c.write(hdr.correlationID, unsupportedApiVersionsResponse(), nil) == nil
	case err != nil:
		c.log.Info("closing connection: bad request", "err", err,
			"api_key", hdr.key, "version", hdr.version, "client_id", hdr.clientID)
		return false
	}

	r := &request{header: hdr, msg: msg, received: received, conn: c}
	resp, err := c.s.handle(r)
	if err != nil {
		c.log.Info("closing connection: request failed", "err", err,
			"api_key", hdr.key, "version", hdr.version, "client_id", hdr.clientID)
		return false
	}
	if resp.msg != nil {
		if err := c.write(hdr.correlationID, resp.msg, resp.fetch); err != nil {
			c.logWriteError(err)
			return false
		}
	} else if resp.fetch != nil {
		resp.fetch.release()
	}
	return !resp.closeConn
}

// readFrame reads one size-prefixed request. A size over MaxRequestBytes
// (or negative) is an error: Kafka closes such connections.
func (c *conn) readFrame() ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(c.r, prefix[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(prefix[:]))
	if size < 0 || size > c.s.cfg.MaxRequestBytes {
		return nil, fmt.Errorf("request size %d exceeds socket.request.max.bytes %d", size, c.s.cfg.MaxRequestBytes)
	}
	return readFull(c.r, int(size))
}

// readFull reads exactly n bytes. Large frames grow their buffer as the
// bytes arrive, so a client announcing a huge request and sending nothing
// does not make the server allocate it up front.
func readFull(r io.Reader, n int) ([]byte, error) {
	const upFront = 1 << 20
	if n <= upFront {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, unexpectedEOF(err)
		}
		return buf, nil
	}
	var b bytes.Buffer
	b.Grow(upFront)
	if _, err := io.CopyN(&b, r, int64(n)); err != nil {
		return nil, unexpectedEOF(err)
	}
	return b.Bytes(), nil
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
			return c.writeFetch(correlationID, msg, fd)
		}
	}
	c.wbuf = appendResponse(c.wbuf[:0], correlationID, msg)
	_, err := c.nc.Write(c.wbuf)
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil // do not pin a large buffer to an idle connection
	}
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
	case errors.Is(err, os.ErrDeadlineExceeded) && c.s.isClosing():
		return // Shutdown interrupted the wait for the next request
	}
	c.log.Info("closing connection", "err", err)
}

func (c *conn) logWriteError(err error) {
	if errors.Is(err, net.ErrClosed) {
		return
	}
	c.log.Debug("writing response failed", "err", err)
}
