package tlsconf

import (
	"crypto/tls"
	"net"
	"sync"
	"syscall"
)

// Socket is the TCP connection under a server's *tls.Conn, made so that
// TLS costs few system calls per byte.
//
// crypto/tls reads and writes one record (at most 16 KiB) per call on the
// connection under it. On the write side Socket holds, inside Batch, the
// records of one response and writes them in pieces of up to
// batchSize, instead of one system call (and, on loopback, one trip
// through the receiver's TCP stack) per record; outside Batch it writes
// through. On the read side each read that finds Socket's buffer empty
// asks the kernel for up to readAheadSize bytes, several records at once.
// Both buffers come from pools and go back as soon as they are empty, and
// the read buffer is taken only once the socket has input, so a
// connection waiting for its peer holds neither. (Under a connection that
// is not a socket, reads go straight through.)
type Socket struct {
	net.Conn

	// The read side, used only by the goroutine reading the tls.Conn
	// (or its handshake). raw is nil when Conn is not a socket; readFn
	// is s.readAhead, made once so that a read allocates nothing, and
	// readErr the error it found.
	raw     syscall.RawConn
	readFn  func(fd uintptr) bool
	readErr error
	in      []byte  // read ahead, not yet read
	inBuf   *[]byte // in's pooled buffer, nil when empty

	mu       sync.Mutex // a write inside Batch may come from crypto/tls on the reading goroutine (a KeyUpdate)
	batching bool
	out      *[]byte // records held in Batch, a pooled buffer
}

const (
	// batchSize is the most Batch holds before it writes: seven full
	// records. One write per record costs far more; but writes of
	// fifteen (256 KiB) cost more than seven too, now that record data
	// is encrypted from the file mappings: kafka's BenchmarkFetchTLS, 8
	// rounds interleaved on two loaded cores, put broker and client at
	// a median 0.69 ms of CPU per MiB against 0.87, the last byte
	// arriving after 0.86 ms against 1.01; franz-go consuming from a
	// wharf process over SSL, 10 rounds, 2.13 ms per MB against 2.21.
	// Writes of three records did about as well as seven; seven make
	// half their system calls. Why larger writes cost more was not
	// established (the peer's receive window had grown to megabytes,
	// so not that). A connection holds the buffer only while it writes
	// a response.
	batchSize = 128 << 10
	// readAheadSize is the most one read asks the kernel for.
	readAheadSize = 64 << 10
)

var (
	batchBufs     = sync.Pool{New: func() any { b := make([]byte, 0, batchSize); return &b }}
	readAheadBufs = sync.Pool{New: func() any { b := make([]byte, readAheadSize); return &b }}
)

// Server is tls.Server over a Socket on nc: write a response through the
// returned tls.Conn inside Socket.Batch.
func Server(nc net.Conn, cfg *tls.Config) (*tls.Conn, *Socket) {
	s := &Socket{Conn: nc, raw: rawConnOf(nc)}
	s.readFn = s.readAhead
	return tls.Server(s, cfg), s
}

// NewListener is tls.NewListener with every connection over a Socket.
func NewListener(inner net.Listener, cfg *tls.Config) net.Listener {
	return &listener{Listener: inner, cfg: cfg}
}

type listener struct {
	net.Listener
	cfg *tls.Config
}

func (l *listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, _ := Server(nc, l.cfg)
	return tc, nil
}

// SocketUnder is the Socket under nc when nc is a tls.Conn made by Server
// or NewListener, and nil otherwise.
func SocketUnder(nc net.Conn) *Socket {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return nil
	}
	s, _ := tc.NetConn().(*Socket)
	return s
}

// Read reads from the read-ahead buffer, refilling it with one read of the
// socket when it is empty. A read of at least readAheadSize goes to the
// connection directly.
func (s *Socket) Read(p []byte) (int, error) {
	if len(s.in) == 0 {
		if s.raw == nil || len(p) >= readAheadSize {
			return s.Conn.Read(p)
		}
		s.readErr = nil
		if err := s.raw.Read(s.readFn); err != nil {
			return 0, err // a deadline, or the socket closed
		}
		if s.readErr != nil {
			return 0, s.readErr
		}
	}
	n := copy(p, s.in)
	s.in = s.in[n:]
	if len(s.in) == 0 {
		readAheadBufs.Put(s.inBuf)
		s.in, s.inBuf = nil, nil
	}
	return n, nil
}

// Write holds p while a Batch is open, and writes it through otherwise.
func (s *Socket) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.batching {
		return s.Conn.Write(p)
	}
	if s.out == nil {
		s.out = batchBufs.Get().(*[]byte)
	}
	if len(*s.out)+len(p) > batchSize {
		if err := s.flushLocked(); err != nil {
			return 0, err
		}
	}
	if len(p) > batchSize {
		return s.Conn.Write(p)
	}
	*s.out = append(*s.out, p...)
	return len(p), nil
}

// Batch runs write, which writes to the tls.Conn over s, holding the
// records it makes so that they leave in writes of up to batchSize; what
// is held is written before Batch returns. An error writing them is
// returned if write itself succeeded.
func (s *Socket) Batch(write func() error) error {
	s.mu.Lock()
	s.batching = true
	s.mu.Unlock()
	err := write()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batching = false
	if ferr := s.flushLocked(); err == nil {
		err = ferr
	}
	if s.out != nil {
		batchBufs.Put(s.out)
		s.out = nil
	}
	return err
}

// flushLocked writes what the batch holds.
func (s *Socket) flushLocked() error {
	if s.out == nil || len(*s.out) == 0 {
		return nil
	}
	_, err := s.Conn.Write(*s.out)
	*s.out = (*s.out)[:0]
	return err
}
