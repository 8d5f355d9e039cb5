package amqp

import (
	"bufio"
	"io"
	"sync"
	"syscall"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Connection buffers are lent, not owned. A connection holds its 64 KiB
// read buffer only while the client is sending and its 64 KiB write buffer
// only while the writer goroutine has something to write; between bursts
// both go back to process-wide pools. Thousands of idle connections then
// cost a few KiB each rather than 128 KiB, while a busy connection keeps
// reading and writing through full-size buffers.
//
// Giving the read buffer back needs a way to wait for input without a
// buffer: awaitInput waits on the socket's readiness through
// syscall.RawConn (the runtime's poller, with deadlines honoured) after a
// non-blocking peek found nothing to read. Connections that are not
// sockets keep their read buffer.

const (
	readBufferSize  = 64 << 10
	writeBufferSize = amqpwire.DefaultWriterBuffer
)

var readBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufferSize) }}

// lentWriter is a amqpwire.Writer with its buffer, lent to one connection at a
// time: its buffer writes to whatever connection borrowed it.
type lentWriter struct {
	dst io.Writer
	w   *amqpwire.Writer
}

func (lw *lentWriter) Write(p []byte) (int, error) { return lw.dst.Write(p) }

var writeBuffers = sync.Pool{New: func() any {
	lw := &lentWriter{}
	lw.w = amqpwire.NewWriter(lw, writeBufferSize)
	return lw
}}

// inputWaiter lets a connection's reader wait for input holding no buffer.
type inputWaiter struct {
	rc syscall.RawConn
	// onReady is the callback given to rc.Read (a method value made once,
	// so waiting allocates nothing); waiting and released are its state.
	onReady  func(fd uintptr) bool
	waiting  bool // the peek found nothing: the next call follows a wake-up
	released bool // the read buffer went back to the pool meanwhile
	c        *conn
}

func newInputWaiter(c *conn) *inputWaiter {
	sc, ok := c.nc.(syscall.Conn)
	if !ok || !canPeek {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	iw := &inputWaiter{rc: rc, c: c}
	iw.onReady = iw.ready
	return iw
}

// ready is called by rc.Read: first to peek, then after each wake-up. It
// returns the read buffer when there is nothing to read, just before the
// reader parks.
func (iw *inputWaiter) ready(fd uintptr) bool {
	if iw.waiting {
		return true // woken by the poller: input (or EOF, or an error) is there
	}
	if socketHasInput(fd) {
		return true
	}
	iw.waiting = true
	iw.released = true
	iw.c.releaseReadBuffer()
	return false
}

// awaitInput returns once the connection has input (or fails: a
// deadline, the socket closed), with a read buffer in place either way.
func (c *conn) awaitInput() error {
	iw := c.input
	iw.waiting, iw.released = false, false
	// The error, a *net.OpError, wraps what a Read would report
	// (os.ErrDeadlineExceeded, net.ErrClosed).
	err := iw.rc.Read(iw.onReady)
	if iw.released {
		c.acquireReadBuffer()
	}
	return err
}

// nextFrame is the read loop's ReadFrame: when everything read so far has
// been handled, it waits for more input without holding a buffer. Before
// it may wait (no whole frame buffered) it flushes the publishes held
// back: a batch ends where the client's burst ends.
func (c *conn) nextFrame() (amqpwire.Frame, error) {
	if !c.fr.HasFrame() {
		c.flushPublishes()
	}
	if c.input != nil && c.fr.Buffered() == 0 {
		if err := c.awaitInput(); err != nil {
			return amqpwire.Frame{}, err
		}
	}
	return c.fr.ReadFrame()
}

func (c *conn) acquireReadBuffer() {
	br := readBuffers.Get().(*bufio.Reader)
	br.Reset(&c.recv)
	c.br = br
	if c.fr != nil {
		c.fr.Reset(br)
	}
}

// releaseReadBuffer gives the read buffer back; whatever it held is
// dropped, so the reader must have handled it. Reader only.
func (c *conn) releaseReadBuffer() {
	if c.br == nil {
		return
	}
	c.br.Reset(nil)
	readBuffers.Put(c.br)
	c.br = nil
}

// writer returns the connection's amqpwire.Writer, borrowing one if it holds
// none. Only the goroutine that writes (the reader during the handshake,
// then the writer goroutine) calls it.
func (c *conn) writer() *amqpwire.Writer {
	if c.lw == nil {
		c.lw = writeBuffers.Get().(*lentWriter)
		c.lw.dst = &c.sent
		c.lw.w.SetFrameMax(c.frameMax)
	}
	return c.lw.w
}

// releaseWriter gives the write buffer back once everything written was
// flushed. After a write error the buffer keeps the error and is dropped.
func (c *conn) releaseWriter() {
	lw := c.lw
	if lw == nil {
		return
	}
	c.lw = nil
	if c.writeErr != nil || lw.w.Buffered() > 0 {
		return
	}
	lw.dst = nil
	writeBuffers.Put(lw)
}

// releaseBuffers returns both buffers when the connection is over (the
// writer goroutine, if it ran, has stopped).
func (c *conn) releaseBuffers() {
	c.releaseReadBuffer()
	c.releaseWriter()
}
