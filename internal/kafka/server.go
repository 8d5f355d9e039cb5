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
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/acl"
	"github.com/wharf-mq/wharf/internal/authlimit"
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/netserve"
	"github.com/wharf-mq/wharf/internal/quota"
	"github.com/wharf-mq/wharf/internal/txn"
	"github.com/wharf-mq/wharf/internal/users"
)

// Defaults of the connection limits in Config.
const (
	// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes default.
	DefaultMaxRequestBytes = 100 << 20
	// DefaultMaxNonProduceRequestBytes bounds every request but Produce.
	// Only Produce carries records; the largest other requests list
	// partitions (a Fetch, ListOffsets or OffsetCommit names each in
	// 20 to 35 bytes), so 1 MiB is about 30,000 partitions in one
	// request, several times what one Kafka broker is advised to lead.
	// Decoding may allocate up to maxDecodeAmplification times a
	// request's size (request_cost.go), so the limit also bounds that.
	DefaultMaxNonProduceRequestBytes = 1 << 20
	// DefaultQueuedMaxRequestBytes bounds the memory of requests read
	// and not yet answered, across all connections.
	DefaultQueuedMaxRequestBytes = 512 << 20
	// DefaultConnectionsMaxIdle is Kafka's connections.max.idle.ms
	// default.
	DefaultConnectionsMaxIdle = 10 * time.Minute
)

// Config configures a Server.
type Config struct {
	// AdvertisedHost and AdvertisedPort are what Metadata and
	// DescribeCluster tell clients of Serve's PLAINTEXT listener to
	// connect to (ServeListener's listeners carry their own).
	AdvertisedHost string
	AdvertisedPort int32
	// MaxRequestBytes (socket.request.max.bytes) bounds one Produce
	// request, and every other request too when smaller than
	// MaxNonProduceRequestBytes; a larger size prefix closes the
	// connection, as in Kafka. 0 means DefaultMaxRequestBytes.
	MaxRequestBytes int32
	// MaxNonProduceRequestBytes bounds every request but Produce (Kafka
	// has no such split: see DefaultMaxNonProduceRequestBytes for why
	// Wharf does). 0 means the default.
	MaxNonProduceRequestBytes int32
	// QueuedMaxRequestBytes bounds, across all connections, the memory
	// held by requests read and not yet answered: each is charged its
	// frame plus what decoding it may allocate (request_cost.go). A
	// connection whose next request does not fit stops reading until
	// it does, like Kafka with queued.max.request.bytes set; a request
	// larger than the whole budget runs once nothing else holds any. 0
	// means DefaultQueuedMaxRequestBytes, negative means no bound.
	QueuedMaxRequestBytes int64
	// ConnectionsMaxIdle (connections.max.idle.ms) closes a connection
	// that has neither completed a request nor been written a response
	// for that long; a request still arriving does not count. 0 means
	// DefaultConnectionsMaxIdle, negative means never.
	ConnectionsMaxIdle time.Duration
	// Logger receives connection-level events; nil means slog.Default().
	Logger *slog.Logger
	// Groups is the group coordinator the group APIs go to; nil makes
	// them answer COORDINATOR_NOT_AVAILABLE.
	Groups *group.Coordinator
	// Transactions is the transaction coordinator the transaction APIs go
	// to; nil makes them answer COORDINATOR_NOT_AVAILABLE. Its owner (the
	// node) opens it and closes it after Shutdown.
	Transactions *txn.Coordinator

	// Users checks SASL logins and holds the SCRAM credentials that
	// Describe/AlterUserScramCredentials manage; nil: every login fails.
	Users *users.Store
	// SASLSessionLifetime (connections.max.reauth.ms) is how long a SASL
	// login lasts before the client must re-authenticate (KIP-368); 0:
	// forever.
	SASLSessionLifetime time.Duration
	// LoginLimiter slows down repeated failed logins from one address;
	// nil: no limit.
	LoginLimiter *authlimit.Limiter
	// Quotas throttle clients over their client quotas (conn_quota.go)
	// and hold the quotas AlterClientQuotas sets; nil: no quotas, and
	// the quota APIs answer as for an empty set.
	Quotas *quota.Manager
	// Authorizer checks every request against the ACLs (authz.go), which
	// DescribeAcls, CreateAcls and DeleteAcls manage; nil: everything is
	// allowed and the ACL APIs answer SECURITY_DISABLED, as Kafka does
	// without an authorizer.
	Authorizer *acl.Authorizer
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

	// budget bounds the memory of requests in flight across all
	// connections (Config.QueuedMaxRequestBytes); nil: unbounded.
	// upFront, a quarter of it, bounds the frame buffers taken before
	// their bytes arrive (conn.readFrame); it is never waited for, so
	// connections that announce large requests and stall can only make
	// other large frames start small, never hold up a request.
	budget  *requestBudget
	upFront *requestBudget

	// netsrv accepts, tracks and shuts down the connections.
	netsrv *netserve.Server[*conn]
	// done is closed when Shutdown starts: it wakes fetch long polls so
	// that in-flight requests finish promptly.
	done <-chan struct{}
	// groups is the group coordinator (nil: none, or not yet: a cluster
	// node opens it once the cluster has a quorum; SetCoordinators).
	groups atomic.Pointer[group.Coordinator]
	// shutdownCtx ends when Shutdown starts, releasing requests that
	// wait: JoinGroup and SyncGroup for a rebalance, a login the
	// failed-login limiter slows down.
	shutdownCtx       context.Context
	cancelShutdownCtx context.CancelFunc
	// userLookupWait is userLookupWait; tests shorten it.
	userLookupWait time.Duration
	// txns is the transaction coordinator (nil: none, or not yet).
	txns atomic.Pointer[txn.Coordinator]
	// observer times answered requests for metrics (observe.go).
	observer requestObserver

	// listeners are the listeners served, for advertised.listeners.
	listenersMu sync.Mutex
	listeners   []*Listener
}

// NewServer returns a Server answering for b.
func NewServer(b *broker.Broker, cfg Config) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxNonProduceRequestBytes <= 0 {
		cfg.MaxNonProduceRequestBytes = DefaultMaxNonProduceRequestBytes
	}
	cfg.MaxNonProduceRequestBytes = min(cfg.MaxNonProduceRequestBytes, cfg.MaxRequestBytes)
	if cfg.QueuedMaxRequestBytes == 0 {
		cfg.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if cfg.ConnectionsMaxIdle == 0 {
		cfg.ConnectionsMaxIdle = DefaultConnectionsMaxIdle
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
		budget:   newRequestBudget(cfg.QueuedMaxRequestBytes),
		upFront:  newRequestBudget(cfg.QueuedMaxRequestBytes / 4),
	}
	s.netsrv = netserve.New(s.log, netserve.Hooks[*conn]{
		NewConn: func(nc net.Conn) *conn { l := s.defaultListener(); return newConn(s, nc, &l) },
		Serve:   (*conn).serve,
		Stop:    (*conn).stopReading,
		Kill:    func(c *conn) { c.raw.Close() },
	})
	s.done = s.netsrv.Done()
	s.SetCoordinators(cfg.Groups, cfg.Transactions)
	s.shutdownCtx, s.cancelShutdownCtx = context.WithCancel(context.Background())
	s.userLookupWait = userLookupWait
	s.zeroCopy.Store(true)
	return s
}

// SetCoordinators gives the server its group and transaction
// coordinators (either may be nil), for a node that opens them after the
// server started serving: until then their APIs answer
// COORDINATOR_NOT_AVAILABLE, which clients retry.
func (s *Server) SetCoordinators(groups *group.Coordinator, txns *txn.Coordinator) {
	s.groups.Store(groups)
	s.txns.Store(txns)
}

// Serve accepts connections on ln until Shutdown, serving each on its own
// goroutine, as a PLAINTEXT listener advertised at Config.AdvertisedHost
// and AdvertisedPort (ServeListener serves others). It returns nil after
// Shutdown and the accept error otherwise. Serve takes ownership of ln and
// closes it.
func (s *Server) Serve(ln net.Listener) error { return s.ServeListener(ln, s.defaultListener()) }

// isClosing reports whether Shutdown has started.
func (s *Server) isClosing() bool { return s.netsrv.Closing() }

// Shutdown stops accepting connections, wakes waiting fetches, lets every
// request already being handled finish and write its response, then closes
// the connections. If ctx ends first, the remaining connections are closed
// at once and ctx's error is returned; a connection goroutine may still be
// finishing a handler (inside an fsync, say) then.
func (s *Server) Shutdown(ctx context.Context) error {
	s.cancelShutdownCtx()
	return s.netsrv.Shutdown(ctx)
}
