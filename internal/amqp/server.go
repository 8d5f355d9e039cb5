package amqp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/mq"
)

// connIDs numbers connections process-wide, so two Servers over one
// registry never hand out the same mq.ConnID. 0 means "no connection".
var connIDs atomic.Uint64

// Server serves AMQP 0-9-1 for one mq.Registry. Create it with NewServer,
// run Serve on one or more listeners and stop it with Shutdown.
type Server struct {
	reg    *mq.Registry
	cfg    Config
	log    *slog.Logger
	users  *userStore
	alarms *alarms

	// done is closed when Shutdown starts.
	done chan struct{}

	mu        sync.Mutex
	closing   bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	monitor   sync.Once      // starts the alarm monitor with the first Serve
	wg        sync.WaitGroup // Serve loops, connections, the alarm monitor
}

// NewServer returns a Server answering for reg.
func NewServer(reg *mq.Registry, cfg Config) *Server {
	cfg = cfg.withDefaults()
	s := &Server{
		reg:       reg,
		cfg:       cfg,
		log:       cfg.Logger.With("component", "amqp"),
		users:     newUserStore(cfg.Users, cfg.LoopbackUsers),
		done:      make(chan struct{}),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
	}
	s.alarms = newAlarms(s)
	return s
}

// Serve accepts connections on ln until Shutdown, serving each on its own
// goroutines. It returns nil after Shutdown and the accept error otherwise.
// Serve takes ownership of ln and closes it.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.monitor.Do(func() {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.alarms.run(s.done)
		}()
	})
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
			if s.isClosing() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Out of file descriptors and the like: wait rather
				// than spin, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "backoff", backoff)
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
		s.startConn(nc)
	}
}

// startConn registers nc and serves it on a new goroutine, unless the
// server is shutting down. The returned channel is closed when the
// connection is finished (nil if it was refused).
func (s *Server) startConn(nc net.Conn) <-chan struct{} {
	c := newConn(s, nc)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		nc.Close()
		return nil
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer s.wg.Done()
		defer s.forgetConn(c)
		c.serve()
	}()
	return finished
}

func (s *Server) forgetConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// eachConn calls fn for every live connection, without the server's lock
// held.
func (s *Server) eachConn(fn func(*conn)) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		fn(c)
	}
}

// Shutdown stops accepting connections and closes every connection the way
// RabbitMQ does when it stops: connection.close with 320 CONNECTION_FORCED,
// waiting for the client's close-ok. Unacknowledged deliveries go back to
// their queues. If ctx ends first the remaining sockets are closed at once
// and ctx's error is returned; either way every goroutine of the server has
// stopped when Shutdown returns nil.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		close(s.done)
		for ln := range s.listeners {
			ln.Close()
		}
	}
	s.mu.Unlock()
	s.eachConn(func(c *conn) { c.forceClose("broker forced connection closure with reason 'shutdown'") })

	finished := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		s.eachConn(func(c *conn) { c.kill() })
		<-finished // with the sockets closed every goroutine ends promptly
		return ctx.Err()
	}
}
