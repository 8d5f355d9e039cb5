package netserve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const testTimeout = 10 * time.Second

// echoConn is a connection that copies what it reads back until its socket
// fails; Stop and Kill are recorded.
type echoConn struct {
	nc      net.Conn
	stopped atomic.Bool
	killed  atomic.Bool
	// ignoreStop makes the connection deaf to Stop, so only Kill ends it.
	ignoreStop bool
}

func newEchoServer(t *testing.T, ignoreStop bool) (*Server[*echoConn], chan *echoConn) {
	t.Helper()
	started := make(chan *echoConn, 16)
	s := New(slog.New(slog.DiscardHandler), Hooks[*echoConn]{
		NewConn: func(nc net.Conn) *echoConn { return &echoConn{nc: nc, ignoreStop: ignoreStop} },
		Serve: func(c *echoConn) {
			defer c.nc.Close()
			started <- c
			io.Copy(c.nc, c.nc)
		},
		Stop: func(c *echoConn) {
			c.stopped.Store(true)
			if !c.ignoreStop {
				c.nc.SetReadDeadline(time.Now())
			}
		},
		Kill: func(c *echoConn) {
			c.killed.Store(true)
			c.nc.Close()
		},
	})
	return s, started
}

// serveOn runs s.Serve(ln) on a goroutine; the channel gets its result.
func serveOn(s *Server[*echoConn], ln net.Listener) <-chan error {
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	return served
}

// shutdown shuts s down, requiring every connection to stop gracefully
// and Serve to return nil.
func shutdown(t *testing.T, s *Server[*echoConn], served <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// dial connects to addr; the connection is closed at cleanup.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialEcho connects to an echo server and checks that it echoes.
func dialEcho(t *testing.T, addr string) net.Conn {
	t.Helper()
	c := dial(t, addr)
	c.SetDeadline(time.Now().Add(testTimeout))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q, %v", buf, err)
	}
	return c
}

func TestShutdownStopsIdleConnections(t *testing.T) {
	s, started := newEchoServer(t, false)
	ln := listen(t)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	dialEcho(t, ln.Addr().String())
	c := <-started

	var monitorRan atomic.Bool
	if !s.Go(func() { <-s.Done(); monitorRan.Store(true) }) {
		t.Fatal("Go refused before Shutdown")
	}

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if !c.stopped.Load() || c.killed.Load() {
		t.Fatalf("stopped=%v killed=%v, want a graceful stop", c.stopped.Load(), c.killed.Load())
	}
	if !monitorRan.Load() {
		t.Fatal("Shutdown returned before a goroutine started by Go ended")
	}
	if !s.Closing() {
		t.Fatal("Closing is false after Shutdown")
	}

	// Once shut down, nothing new is served or started.
	if s.Go(func() {}) {
		t.Fatal("Go ran after Shutdown")
	}
	client, server := net.Pipe()
	defer client.Close()
	if s.ServeConn(server) != nil {
		t.Fatal("ServeConn accepted a connection after Shutdown")
	}
	if _, err := server.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("refused connection not closed: %v", err)
	}
	if err := s.Serve(listen(t)); err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}

func TestShutdownKillsAtDeadline(t *testing.T) {
	s, started := newEchoServer(t, true)
	ln := listen(t)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	dialEcho(t, ln.Addr().String())
	c := <-started

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want deadline exceeded", err)
	}
	if !c.stopped.Load() || !c.killed.Load() {
		t.Fatalf("stopped=%v killed=%v, want both", c.stopped.Load(), c.killed.Load())
	}
	s.Wait()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	var n int
	s.Each(func(*echoConn) { n++ })
	if n != 0 {
		t.Fatalf("%d connections still tracked after Wait", n)
	}
}

// flakyListener fails its first Accept calls with err.
type flakyListener struct {
	net.Listener
	err      error
	mu       sync.Mutex
	failures int
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "accept timed out (test)" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.failures > 0 {
		l.failures--
		l.mu.Unlock()
		return nil, l.err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// acceptError is an accept failure as the net package reports it.
func acceptError(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// TestServeRetriesTransientAcceptErrors: running out of descriptors
// (EMFILE is what about 1,000 idle connections under ulimit -n 1024 bring)
// and the like must not end the listener.
func TestServeRetriesTransientAcceptErrors(t *testing.T) {
	for name, err := range map[string]error{
		"timeout": timeoutError{},
		"EMFILE":  acceptError(syscall.EMFILE),
		"ENFILE":  acceptError(syscall.ENFILE),
		"ENOBUFS": acceptError(syscall.ENOBUFS),
	} {
		t.Run(name, func(t *testing.T) {
			s, started := newEchoServer(t, false)
			ln := &flakyListener{Listener: listen(t), err: err, failures: 3}
			served := serveOn(s, ln)
			dialEcho(t, ln.Addr().String())
			<-started
			shutdown(t, s, served)
		})
	}
}

// failingListener fails Accept with a permanent error.
type failingListener struct{ net.Listener }

var errBroken = errors.New("listener broken")

func (l failingListener) Accept() (net.Conn, error) { return nil, errBroken }

func TestServeReturnsPermanentAcceptError(t *testing.T) {
	s, _ := newEchoServer(t, false)
	ln := failingListener{listen(t)}
	if err := s.Serve(ln); !errors.Is(err, errBroken) {
		t.Fatalf("Serve: %v, want %v", err, errBroken)
	}
	if _, err := ln.Listener.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Serve left its listener open: %v", err)
	}
}

func TestNextBackoff(t *testing.T) {
	want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}
	var d time.Duration
	for _, w := range want {
		if d = nextBackoff(d); d != w {
			t.Fatalf("backoff %v, want %v", d, w)
		}
	}
	if got := nextBackoff(800 * time.Millisecond); got != time.Second {
		t.Fatalf("backoff after 800ms = %v, want the 1s cap", got)
	}
}
