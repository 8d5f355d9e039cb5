// Package kafka is Wharf's Kafka protocol front end: it accepts client
// connections, decodes requests with kmsg, turns each into calls on the
// broker core (internal/broker) and encodes the answers. It holds no storage
// logic; one file per Kafka API (named after the API key) shows where a
// request goes.
package kafka

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/txn"
)

// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes default.
const DefaultMaxRequestBytes = 100 << 20

// Config configures a Server.
type Config struct {
	// AdvertisedHost and AdvertisedPort are what Metadata and
	// DescribeCluster tell clients to connect to.
	AdvertisedHost string
	AdvertisedPort int32
	// MaxRequestBytes (socket.request.max.bytes) bounds one request; a
	// larger size prefix closes the connection. 0 means the default.
	MaxRequestBytes int32
	// Logger receives connection-level events; nil means slog.Default().
	Logger *slog.Logger
	// Groups is the group coordinator the group APIs go to; nil makes
	// them answer COORDINATOR_NOT_AVAILABLE.
	Groups *group.Coordinator
	// Transactions is the transaction coordinator the transaction APIs go
	// to; nil makes them answer COORDINATOR_NOT_AVAILABLE. Its owner (the
	// node) opens it and closes it after Shutdown.
	Transactions *txn.Coordinator
}

// Server serves the Kafka protocol for one broker. Create it with NewServer,
// run Serve on one or more listeners and stop it with Shutdown.
type Server struct {
	broker   *broker.Broker
	cfg      Config
	log      *slog.Logger
	sessions *fetchSessions
	markers  markerSource

	// zeroCopy enables sendfile for fetch responses on TCP connections;
	// tests and the benchmark switch it off to compare with the copy path.
	zeroCopy atomic.Bool

	// testHookFetchWaiting, if set, runs each time a fetch starts waiting
	// for data, so tests can act while a long poll is certainly parked.
	testHookFetchWaiting func()

	// done is closed when Shutdown starts: it wakes fetch long polls so
	// that in-flight requests finish promptly.
	done chan struct{}
	// groups is the group coordinator (nil: none). groupWait ends when
	// Shutdown starts, releasing JoinGroup and SyncGroup requests that
	// wait for a rebalance.
	groups          *group.Coordinator
	groupWait       context.Context
	cancelGroupWait context.CancelFunc
	// txns is the transaction coordinator (nil: none).
	txns *txn.Coordinator

	mu        sync.Mutex
	closing   bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	wg        sync.WaitGroup // one per Serve loop and per connection goroutine
}

// NewServer returns a Server answering for b.
func NewServer(b *broker.Broker, cfg Config) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		broker:    b,
		cfg:       cfg,
		log:       logger.With("component", "kafka"),
		sessions:  newFetchSessions(defaultFetchSessionSlots, defaultFetchSessionIdle),
		markers:   newMarkerSource(),
		done:      make(chan struct{}),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
	}
	s.groups = cfg.Groups
	s.groupWait, s.cancelGroupWait = context.WithCancel(context.Background())
	s.zeroCopy.Store(true)
	s.txns = cfg.Transactions
	return s
}

// Serve accepts connections on ln until Shutdown, serving each on its own
// goroutine. It returns nil after Shutdown and the accept error otherwise.
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
				// Out of file descriptors and the like: wait a little
				// rather than spin, as net/http does.
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

// startConn registers nc and starts its serving goroutine, unless the
// server is already shutting down.
func (s *Server) startConn(nc net.Conn) {
	c := newConn(s, nc)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer s.forgetConn(c)
		c.serve()
	}()
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

// Shutdown stops accepting connections, wakes waiting fetches, lets every
// request already being handled finish and write its response, then closes
// the connections. If ctx ends first, the remaining connections are closed
// at once and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		close(s.done)
		s.cancelGroupWait()
		for ln := range s.listeners {
			ln.Close()
		}
		for c := range s.conns {
			c.stopReading()
		}
	}
	s.mu.Unlock()

	// The waiter outlives a timed-out Shutdown until the last connection
	// goroutine ends (a handler may be inside an fsync).
	finished := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}
