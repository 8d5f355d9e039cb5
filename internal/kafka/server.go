// Package kafka is Wharf's Kafka protocol front end: it accepts client
// connections, decodes requests with kmsg, turns each into calls on the
// broker core (internal/broker) and encodes the answers. It holds no storage
// logic; one file per Kafka API (named after the API key) shows where a
// request goes.
package kafka

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/netserve"
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

	// netsrv accepts, tracks and shuts down the connections.
	netsrv *netserve.Server[*conn]
	// done is closed when Shutdown starts: it wakes fetch long polls so
	// that in-flight requests finish promptly.
	done <-chan struct{}
	// groups is the group coordinator (nil: none). groupWait ends when
	// Shutdown starts, releasing JoinGroup and SyncGroup requests that
	// wait for a rebalance.
	groups          *group.Coordinator
	groupWait       context.Context
	cancelGroupWait context.CancelFunc
	// txns is the transaction coordinator (nil: none).
	txns *txn.Coordinator
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
		broker:   b,
		cfg:      cfg,
		log:      logger.With("component", "kafka"),
		sessions: newFetchSessions(defaultFetchSessionSlots, defaultFetchSessionIdle),
		markers:  newMarkerSource(),
	}
	s.netsrv = netserve.New(s.log, netserve.Hooks[*conn]{
		NewConn: func(nc net.Conn) *conn { return newConn(s, nc) },
		Serve:   (*conn).serve,
		Stop:    (*conn).stopReading,
		Kill:    func(c *conn) { c.nc.Close() },
	})
	s.done = s.netsrv.Done()
	s.groups = cfg.Groups
	s.groupWait, s.cancelGroupWait = context.WithCancel(context.Background())
	s.zeroCopy.Store(true)
	s.txns = cfg.Transactions
	return s
}

// Serve accepts connections on ln until Shutdown, serving each on its own
// goroutine. It returns nil after Shutdown and the accept error otherwise.
// Serve takes ownership of ln and closes it.
func (s *Server) Serve(ln net.Listener) error { return s.netsrv.Serve(ln) }

// isClosing reports whether Shutdown has started.
func (s *Server) isClosing() bool { return s.netsrv.Closing() }

// Shutdown stops accepting connections, wakes waiting fetches, lets every
// request already being handled finish and write its response, then closes
// the connections. If ctx ends first, the remaining connections are closed
// at once and ctx's error is returned; a connection goroutine may still be
// finishing a handler (inside an fsync, say) then.
func (s *Server) Shutdown(ctx context.Context) error {
	s.cancelGroupWait()
	return s.netsrv.Shutdown(ctx)
}
