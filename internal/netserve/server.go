// Package netserve runs the connection side of a stream-protocol server:
// it accepts connections from listeners (backing off while the process is
// out of file descriptors or memory), serves each on a goroutine it owns,
// keeps the set of live connections, and shuts down in two steps: a
// graceful stop every connection is asked for, then a forced close when
// the caller's deadline passes. LimitListener caps how many connections a
// listener keeps open (limit.go), and FromLoopback tells a local peer from
// a remote one (loopback.go). What a connection says is left to the
// protocol front ends (internal/kafka, internal/amqp, internal/httpapi)
// that use it.
package netserve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// Hooks is what a protocol front end supplies for its connection type C.
type Hooks[C comparable] struct {
	// NewConn wraps a just-accepted socket. It may run after Shutdown has
	// started, in which case the connection is dropped unserved.
	NewConn func(net.Conn) C
	// Serve runs a connection to its end and closes its socket.
	Serve func(C)
	// Stop asks a connection to wind down: called once for every live
	// connection when Shutdown starts (Kafka interrupts a read waiting
	// for the next request, AMQP sends connection.close). It may race
	// with the connection ending on its own.
	Stop func(C)
	// Kill closes a connection at once, so that Serve returns promptly:
	// called for every connection still live when Shutdown's context ends.
	Kill func(C)
}

// Server accepts and tracks the connections of one protocol front end.
// Create it with New, run Serve on one or more listeners and stop it with
// Shutdown.
type Server[C comparable] struct {
	hooks Hooks[C]
	log   *slog.Logger

	// done is closed, under mu, when Shutdown starts.
	done chan struct{}

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[C]struct{}
	wg        sync.WaitGroup // Serve loops, connections, goroutines started by Go
}

// New returns a Server whose connections behave as hooks say; accept
// failures are logged to log.
func New[C comparable](log *slog.Logger, hooks Hooks[C]) *Server[C] {
	return &Server[C]{
		hooks:     hooks,
		log:       log,
		done:      make(chan struct{}),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[C]struct{}),
	}
}

// Done is closed when Shutdown starts, so that long waits inside requests
// can give up promptly.
func (s *Server[C]) Done() <-chan struct{} { return s.done }

// Closing reports whether Shutdown has started.
func (s *Server[C]) Closing() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Serve accepts connections on ln until Shutdown, serving each on its own
// goroutine. It returns nil after Shutdown and the accept error otherwise.
// Serve takes ownership of ln and closes it.
func (s *Server[C]) Serve(ln net.Listener) error { return s.ServeWith(ln, s.hooks.NewConn) }

// ServeWith is Serve with newConn in place of Hooks.NewConn, for a front
// end whose listeners differ (each Kafka listener has its own security
// protocol and advertised address).
func (s *Server[C]) ServeWith(ln net.Listener, newConn func(net.Conn) C) error {
	s.mu.Lock()
	if s.Closing() {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.Closing() {
				return nil
			}
			if transientAcceptError(err) {
				// Wait rather than spin, as net/http does: the
				// connection stays in the kernel's backlog until a
				// descriptor is free again.
				backoff = nextBackoff(backoff)
				s.log.Warn("accept failed; retrying", "addr", ln.Addr().String(), "err", err, "backoff", backoff)
				select {
				case <-time.After(backoff):
				case <-s.done:
					return nil
				}
				continue
			}
			return err
		}
		backoff = 0
		s.serveConn(nc, newConn)
	}
}

// transientAcceptErrors are the accept failures that pass once other
// connections or files close: out of file descriptors (the process's,
// EMFILE, or the system's, ENFILE) or of kernel memory, or a connection
// reset before it could be accepted.
var transientAcceptErrors = []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED}

// transientAcceptError reports whether Serve should retry after err rather
// than give the listener up.
func transientAcceptError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, target := range transientAcceptErrors {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// nextBackoff doubles the wait after a failed accept, from 5ms up to 1s.
func nextBackoff(d time.Duration) time.Duration {
	return min(max(2*d, 5*time.Millisecond), time.Second)
}

// ServeConn registers nc and serves it on a new goroutine, unless the
// server is shutting down. The returned channel is closed when the
// connection is finished (nil if it was refused and nc closed). Serve uses
// it for every accepted socket; tests may hand it one end of a net.Pipe.
// A connection from LimitListener is served as the socket underneath; its
// slot is given back once Serve has returned (and closed the socket).
func (s *Server[C]) ServeConn(nc net.Conn) <-chan struct{} { return s.serveConn(nc, s.hooks.NewConn) }

func (s *Server[C]) serveConn(nc net.Conn, newConn func(net.Conn) C) <-chan struct{} {
	nc, releaseSlot := unwrapLimited(nc)
	c := newConn(nc)
	s.mu.Lock()
	if s.Closing() {
		s.mu.Unlock()
		nc.Close()
		releaseSlot()
		return nil
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer s.wg.Done()
		defer releaseSlot()
		defer s.forget(c)
		s.hooks.Serve(c)
	}()
	return finished
}

func (s *Server[C]) forget(c C) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Go runs fn on a goroutine Shutdown waits for, unless Shutdown has
// started (then fn does not run and Go returns false). fn should return
// once Done is closed.
func (s *Server[C]) Go(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Closing() {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}

// Each calls fn for every live connection, without the server's lock held
// (fn may take locks a connection goroutine holds while it ends).
func (s *Server[C]) Each(fn func(C)) {
	s.mu.Lock()
	conns := make([]C, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		fn(c)
	}
}

// Shutdown stops accepting connections, asks every live connection to
// stop (Hooks.Stop, on the first call only) and waits for all of the
// server's goroutines to end. If ctx ends first it closes the remaining
// connections (Hooks.Kill) and returns ctx's error without waiting
// further: a connection may be inside a slow call (an fsync) that no
// socket close interrupts. Wait waits for those stragglers.
func (s *Server[C]) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	first := !s.Closing()
	if first {
		close(s.done)
		for ln := range s.listeners {
			ln.Close()
		}
	}
	s.mu.Unlock()
	if first {
		// No connection registers once done is closed, so this
		// reaches every connection that will ever need stopping.
		s.Each(s.hooks.Stop)
	}

	// The waiter outlives a timed-out Shutdown until the last goroutine
	// of the server ends.
	finished := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		s.Each(s.hooks.Kill)
		return ctx.Err()
	}
}

// Wait blocks until every Serve loop, connection and goroutine started by
// Go has ended. Only meaningful once Shutdown has started.
func (s *Server[C]) Wait() { s.wg.Wait() }
