// Package node runs one Wharf process and is its composition root: it
// takes the data directory's lock, opens the Kafka core (internal/broker)
// and the queueing core (internal/mq) side by side, joins them through the
// stream bridge (internal/streambridge) and hooks (cores.go), starts the
// Kafka coordinators, binds the protocol listeners and owns the goroutines
// that serve them. Each front end gets the core it serves: Kafka the
// broker and coordinators; AMQP and the management API the mq registry;
// NATS a subject router, which the subject bridge (internal/subjectbridge)
// shares with amq.topic of vhost "/". cmd/wharf and end-to-end tests start
// Wharf through this package and nothing else, so both exercise the same
// wiring.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqp"
	"github.com/wharf-mq/wharf/internal/authlimit"
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/httpapi"
	"github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/nats"
	"github.com/wharf-mq/wharf/internal/netserve"
	"github.com/wharf-mq/wharf/internal/replica"
	"github.com/wharf-mq/wharf/internal/subjectbridge"
	"github.com/wharf-mq/wharf/internal/subjects"
	"github.com/wharf-mq/wharf/internal/tlsconf"
	"github.com/wharf-mq/wharf/internal/txn"
	"github.com/wharf-mq/wharf/internal/users"
	"github.com/wharf-mq/wharf/internal/version"
)

// Config describes one Wharf process. The zero value of a broker knob means
// the broker's default (see broker.Config).
type Config struct {
	DataDir string // where the metadata log and every partition live

	// KafkaAddr is the Kafka listener's address, e.g. ":9092". Port 0 picks a
	// free port; Node.KafkaAddr reports the one bound.
	KafkaAddr string
	// KafkaListeners, when set, replaces KafkaAddr with listeners of
	// several security protocols (--kafka-listeners); see
	// kafka_listeners.go.
	KafkaListeners []KafkaListener
	// KafkaSecurity is the Kafka listeners' SASL session lifetime, ACL
	// authorizer and super users (kafka_security.go).
	KafkaSecurity KafkaSecurityConfig
	// NodeID is the broker id clients see (0: 1, as in Kafka's sample
	// server.properties).
	NodeID int32
	// AMQPAddr is the AMQP 0-9-1 listener's address, e.g. ":5672"; empty
	// binds nothing. Port 0 picks a free port; Node.AMQPAddr reports it.
	AMQPAddr string
	// AMQP tunes the AMQP front end (limits, alarms). Its DataDir
	// (watched by the disk alarm) defaults to DataDir and its Logger to
	// Logger; the node gives it its users and permissions.
	AMQP amqp.Config
	// HTTPAddr is the management API's address (RabbitMQ's HTTP API
	// subset, internal/httpapi), e.g. ":15672"; empty binds nothing. Port
	// 0 picks a free port; Node.HTTPAddr reports it. Its users are the
	// node's, loopback-only as AMQP.LoopbackUsers says.
	HTTPAddr string
	// AMQPSAddr and HTTPSAddr are the AMQP and management listeners over
	// TLS (RabbitMQ's 5671 and 15671), with Security.TLS's certificate,
	// which they need; empty binds nothing.
	AMQPSAddr, HTTPSAddr string
	// NATSAddr is the Core NATS listener's address, e.g. ":4222"; empty
	// binds nothing. Port 0 picks a free port; Node.NATSAddr reports it.
	NATSAddr string
	// NATS tunes the NATS front end (users or token, limits). Its Logger
	// defaults to Logger.
	NATS nats.Config

	// AdvertisedHost is the host clients are told to connect to in Metadata
	// responses. Empty: the listener's host, or "localhost" when the listener
	// binds every interface. The advertised port is always the bound port.
	AdvertisedHost string

	Fsync          replica.FsyncPolicy // when appends are fsynced (default: before acks=all replies)
	FlushInterval  time.Duration       // background fsync period (0: broker default)
	RetentionCheck time.Duration       // retention sweep period (0: broker default)
	// ScrubInterval and ScrubBytesPerSecond are broker.Config's: how often
	// every log is read back and CRC-checked in full (0: only once after
	// start-up, what recovery did not verify; negative: never), and at
	// most how fast (0: broker default; negative: no cap).
	ScrubInterval       time.Duration
	ScrubBytesPerSecond int64
	// MetadataLogSegmentBytes is broker.Config's: the metadata log's
	// segment size, which bounds what its compaction leaves (0: broker
	// default, 8 MiB).
	MetadataLogSegmentBytes int64
	AutoCreateTopics        *bool // create unknown topics on first use (nil: true)
	DefaultPartitions       int32 // partitions of auto-created topics (0: broker default)
	MaxRequestBytes         int32 // largest Kafka request accepted (0: front-end default)

	// Kafka replication settings (broker.Config's): the default
	// min.insync.replicas (0: min(2, replication factor)), and moving
	// leaderships back to preferred replicas (nil: on) every
	// LeaderImbalanceCheck (0: 300 s).
	MinInsyncReplicas    int
	AutoLeaderRebalance  *bool
	LeaderImbalanceCheck time.Duration

	// Kafka connection limits (see kafka.Config for each; 0 means the
	// Kafka front end's default).
	KafkaMaxNonProduceRequestBytes int32         // largest Kafka request but Produce
	KafkaQueuedMaxRequestBytes     int64         // memory of Kafka requests in flight (negative: unbounded)
	KafkaConnectionsMaxIdle        time.Duration // close idle Kafka connections after (negative: never)

	// MaxConnections caps the open connections of each listener (Kafka, NATS,
	// AMQP, HTTP): one more is closed at once (netserve.LimitListener).
	// 0: netserve.DefaultMaxConnections, three eighths of the open-file
	// limit shared by the node's listeners; negative: no cap.
	MaxConnections int

	// Security is the user store's bootstrap administrator and the TLS
	// certificate; the zero value: guest/guest (loopback only), no TLS.
	Security SecurityConfig

	Logger *slog.Logger // nil: discard

	// Cluster makes the node one of a cluster (cluster.go); nil: a single
	// node.
	Cluster *ClusterConfig

	// Groups tunes the group coordinator (timeouts, offset retention);
	// the node sets its Broker and Logger.
	Groups group.Config
	// Transactions tunes the transaction coordinator (timeouts, id
	// expiration); the node sets its Broker, Groups and Logger.
	Transactions txn.Config
}

// Node is a running Wharf process. It owns the cores and the goroutines
// serving the listeners; Close stops them all.
type Node struct {
	cfg    Config
	logger *slog.Logger
	cores  *cores
	users  *users.Store
	access *access.Store
	certs  *tlsconf.Reloader // nil without TLS

	logins *authlimit.Limiter // failed logins per address, shared by every protocol
	// kafkaAccess is the Kafka listeners' ACLs and client quotas.
	kafkaAccess kafkaAccess

	kafkaListeners boundKafkaListeners // at least one
	kafkaServer    *kafka.Server
	// groups is the group coordinator; in a cluster nil until
	// openClusterCoordinators stores it, while the management API reads it.
	groups          atomic.Pointer[group.Coordinator]
	txns            *txn.Coordinator
	coordinating    sync.WaitGroup // openClusterCoordinators, stopWhenRemoved
	advertisedKafka string

	amqpListener net.Listener // nil when Config.AMQPAddr is empty
	amqpServer   *amqp.Server

	httpListener net.Listener // nil when Config.HTTPAddr is empty
	httpServer   *httpapi.Server

	tlsListeners tlsListeners // AMQPS and HTTPS

	natsListener net.Listener // nil when Config.NATSAddr is empty
	natsServer   *nats.Server
	jetstreamAPI *nats.JetStream // nil when Config.NATSAddr is empty, and in a cluster

	serving   sync.WaitGroup // one per listener's Serve goroutine
	doneOnce  sync.Once
	serveDone chan struct{} // closed when a server failed, or every server stopped in Close
	errMu     sync.Mutex
	serveErr  error // the first server failure

	closeOnce sync.Once
	closeErr  error
	closing   chan struct{} // closed when Close starts, so Serve's return is expected
}

// Start opens the cores in cfg.DataDir, binds the Kafka listener (and the
// AMQP, HTTP and NATS ones where their addresses are set) and serves each
// in a goroutine the Node owns. On error nothing is left running and the
// data directory is closed cleanly.
func Start(cfg Config) (*Node, error) { return StartContext(context.Background(), cfg) }

// StartContext is Start, given up when ctx ends: a cluster node waits,
// without a limit, for a quorum of its metadata group before it serves
// (broker.Open, given ctx by cluster.go), and ctx is how its operator stops it
// meanwhile.
func StartContext(ctx context.Context, cfg Config) (_ *Node, err error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("node: empty data directory")
	}

	c, err := openCores(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	// undo takes back, newest first, what a start that fails half-way has
	// opened: listeners, then the coordinators, then the cores (so their
	// logs get their clean-shutdown markers and the next start skips
	// recovery).
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	undo = append(undo, func() {
		if cerr := c.close(); cerr != nil {
			logger.Error("closing the cores after a failed start", "err", cerr)
		}
	})
	b := c.broker

	userStore, certs, err := openSecurity(cfg.Security, b)
	if err != nil {
		return nil, err
	}
	accessStore, err := openAccess(cfg.Security, b, userStore)
	if err != nil {
		return nil, err
	}
	kafkaAccess, err := openKafkaAccess(cfg.KafkaSecurity, b)
	if err != nil {
		return nil, err
	}

	kafkaLns, err := listenKafka(cfg, certs)
	if err != nil {
		return nil, err
	}
	undo = append(undo, kafkaLns.close)
	amqpLn, err := listenIfSet("AMQP", cfg.AMQPAddr)
	if err != nil {
		return nil, err
	}
	undo = append(undo, closeIfOpen(amqpLn))
	httpLn, err := listenIfSet("HTTP", cfg.HTTPAddr)
	if err != nil {
		return nil, err
	}
	undo = append(undo, closeIfOpen(httpLn))
	tlsLns, err := listenTLS(cfg, certs)
	if err != nil {
		return nil, err
	}
	undo = append(undo, tlsLns.close)
	router := subjects.New() // NATS subjects, shared with amq.topic (bridgeSubjects)
	natsLn, natsSrv, err := startNATS(cfg, router, c.jetstream != nil, logger)
	if err != nil {
		return nil, err
	}
	undo = append(undo, closeIfOpen(natsLn))

	var groups *group.Coordinator
	var txns *txn.Coordinator
	if cfg.Cluster == nil {
		if groups, txns, err = openCoordinators(cfg, b, logger); err != nil {
			return nil, err
		}
		undo = append(undo, func() { txns.Close(); groups.Close() })
	}

	n := &Node{
		cfg:             cfg,
		logger:          logger,
		cores:           c,
		users:           userStore,
		access:          accessStore,
		certs:           certs,
		logins:          authlimit.New(authlimit.Config{}),
		kafkaAccess:     kafkaAccess,
		tlsListeners:    tlsLns,
		txns:            txns,
		kafkaListeners:  kafkaLns,
		amqpListener:    amqpLn,
		httpListener:    httpLn,
		natsListener:    natsLn,
		natsServer:      natsSrv,
		advertisedKafka: kafkaLns[0].advertised(),
		serveDone:       make(chan struct{}),
		closing:         make(chan struct{}),
	}
	n.groups.Store(groups)
	n.kafkaServer = kafka.NewServer(b, n.kafkaConfig())
	n.serveKafka(cfg.Security.TLS.ClientCA != "")
	b.Register(kafkaLns[0].spec.AdvertisedHost, kafkaLns[0].spec.AdvertisedPort) // in a cluster only
	if cfg.Cluster != nil {
		n.coordinating.Go(n.openClusterCoordinators)
		n.coordinating.Go(n.stopWhenRemoved)
	}

	if amqpLn != nil || tlsLns.amqps != nil {
		amqpCfg := cfg.AMQP
		amqpCfg.Users, amqpCfg.Access, amqpCfg.Limiter = userStore, accessStore, n.logins
		if amqpCfg.DataDir == "" {
			amqpCfg.DataDir = cfg.DataDir
		}
		if amqpCfg.Logger == nil {
			amqpCfg.Logger = logger // the server tags its lines component=amqp
		}
		if amqpCfg.Version == "" {
			amqpCfg.Version = version.String()
		}
		n.amqpServer = amqp.NewServer(c.queues, amqpCfg)
		// Other nodes' management API asks this node about its clients.
		c.queues.ServeClientsWith(n.amqpServer)
		if amqpLn != nil {
			n.serve("amqp", func() error { return n.amqpServer.Serve(n.limited("amqp", amqpLn)) })
			logger.Info("amqp listener started", "addr", n.AMQPAddr())
		}
		if tlsLns.amqps != nil {
			n.serve("amqps", func() error { return n.amqpServer.Serve(n.servingTLS("amqps", tlsLns.amqps)) })
			logger.Info("amqps listener started", "addr", n.AMQPSAddr())
		}
	}
	if httpLn != nil || tlsLns.https != nil {
		apiCfg := httpapi.Config{
			Users:         userStore,
			Access:        accessStore,
			Limiter:       n.logins,
			LoopbackUsers: cfg.AMQP.LoopbackUsers,
			Listeners:     n.apiListeners(),
			Version:       version.String(),
			Logger:        logger.With("component", "http"),
		}
		if n.amqpServer != nil {
			apiCfg.AMQP = n.amqpServer
		}
		n.httpServer = httpapi.New(c.queues, apiCfg)
		n.addManagement(c.broker, c.queues)
		if httpLn != nil {
			n.serve("http", func() error { return n.httpServer.Serve(n.limited("http", httpLn)) })
			logger.Info("http listener started", "addr", n.HTTPAddr())
		}
		if tlsLns.https != nil {
			n.serve("https", func() error { return n.httpServer.Serve(n.servingTLS("https", tlsLns.https)) })
			logger.Info("https listener started", "addr", n.HTTPSAddr())
		}
	}
	if natsLn != nil {
		if err := n.bridgeSubjects(router, natsLn.Addr()); err != nil {
			logger.Error("NATS subjects and amq.topic not bridged", "err", err)
		}
		if err := n.serveJetStream(router); err != nil {
			return nil, err
		}
		n.serve("nats", func() error { return n.natsServer.Serve(n.limited("nats", natsLn)) })
		logger.Info("nats listener started", "addr", n.NATSAddr())
	}
	return n, nil
}

// openCoordinators opens the group coordinator and the transaction
// coordinator, and makes the group coordinator hear of every transaction
// marker the broker writes. On a single node the group coordinator
// rebuilds every group from __consumer_offsets, and the transaction
// coordinator every transactional id from __transaction_state, finishing
// the transactions a stop left committing or aborting, before the first
// request can reach them; in a cluster each rebuilds a partition's state
// when this node takes its leadership (internal/group and internal/txn,
// leadership.go).
func openCoordinators(cfg Config, b *broker.Broker, logger *slog.Logger) (*group.Coordinator, *txn.Coordinator, error) {
	groupCfg := cfg.Groups
	groupCfg.Broker = b
	groupCfg.Logger = logger
	groups, err := group.Open(groupCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	txnCfg := cfg.Transactions
	txnCfg.Broker, txnCfg.Groups, txnCfg.Logger = b, groups, logger
	txns, err := txn.Open(txnCfg)
	if err != nil {
		groups.Close()
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	b.OnTxnMarker(groups.CompleteTxn)
	return groups, txns, nil
}

// listenIfSet binds addr for the named protocol, or nothing when addr is
// empty.
func listenIfSet(name, addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node: listen for %s on %q: %w", name, addr, err)
	}
	return ln, nil
}

// closeIfOpen closes ln, if there is one.
func closeIfOpen(ln net.Listener) func() {
	return func() {
		if ln != nil {
			ln.Close()
		}
	}
}

// startNATS binds the NATS listener and builds its server over router
// (Core NATS keeps nothing on the broker's logs), announcing JetStream if
// the node serves it, or returns nils when cfg.NATSAddr is empty.
func startNATS(cfg Config, router *subjects.Router, jetStream bool, logger *slog.Logger) (net.Listener, *nats.Server, error) {
	if cfg.NATSAddr == "" {
		return nil, nil, nil
	}
	natsCfg := cfg.NATS
	natsCfg.JetStream = jetStream
	if natsCfg.Logger == nil {
		natsCfg.Logger = logger // the server tags its lines component=nats
	}
	srv, err := nats.NewServer(router, natsCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.NATSAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("node: listen for NATS on %q: %w", cfg.NATSAddr, err)
	}
	return ln, srv, nil
}

// bridgeSubjects makes NATS subjects and amq.topic of vhost "/" one
// routing space (internal/subjectbridge), within the NATS front end's
// max_payload and the AMQP front end's memory high-water mark, unless the
// NATS listener takes clients from the network with no authentication:
// then it warns and bridges nothing.
func (n *Node) bridgeSubjects(router *subjects.Router, natsAddr net.Addr) error {
	if n.cfg.NATS.Token == "" && len(n.cfg.NATS.Users) == 0 && !netserve.FromLoopback(natsAddr.String()) {
		// AMQP lets guest in from loopback only and checks every
		// user's permissions; a NATS client on the network with no
		// password at all must not reach AMQP's queues through the
		// bridge.
		n.logger.Warn("NATS listener accepts clients from the network without authentication; set --nats-user and --nats-password or --nats-token, or bind loopback (--nats-addr 127.0.0.1:4222)",
			"addr", natsAddr.String())
		n.logger.Warn("NATS subjects are not bridged to amq.topic while the NATS listener needs no authentication and is open to the network")
		return nil
	}
	cfg := subjectbridge.Config{MaxPayload: n.natsServer.MaxPayload(), Logger: n.logger}
	if n.amqpServer != nil {
		cfg.MemoryLimit = n.amqpServer.Resources().MemoryLimit
	}
	return subjectbridge.Install(router, n.cores.queues, cfg)
}

// serve runs one listener's server until Close shuts it down. A return
// before Close is a failure: it is logged, and Done and Err report it.
func (n *Node) serve(name string, run func() error) {
	n.serving.Add(1)
	go func() {
		defer n.serving.Done()
		err := run()
		select {
		case <-n.closing:
			// Serve returning during Close is the expected way out.
			return
		default:
		}
		if err == nil {
			err = errors.New(name + " server stopped unexpectedly")
		}
		n.logger.Error(name+" server stopped", "err", err)
		n.fail(fmt.Errorf("%s server: %w", name, err))
	}()
}

// fail stops the node's serving for err, which Err reports (the first
// one, if several come), and Done announces.
func (n *Node) fail(err error) {
	n.errMu.Lock()
	if n.serveErr == nil {
		n.serveErr = err
	}
	n.errMu.Unlock()
	n.markDone()
}

// limited applies Config.MaxConnections to one listener, named in the
// log when it refuses connections.
func (n *Node) limited(name string, ln net.Listener) net.Listener {
	max := n.cfg.MaxConnections
	if max == 0 {
		max = netserve.DefaultMaxConnections(n.listenerCount())
	}
	return netserve.LimitListener(ln, max, name, n.logger)
}

// listenerCount is how many listeners the node bound, among which the
// default connection caps share the open-file limit.
func (n *Node) listenerCount() int {
	count := len(n.kafkaListeners)
	for _, ln := range []net.Listener{n.amqpListener, n.httpListener, n.natsListener, n.tlsListeners.amqps, n.tlsListeners.https} {
		if ln != nil {
			count++
		}
	}
	return count
}

func (n *Node) markDone() { n.doneOnce.Do(func() { close(n.serveDone) }) }

// HTTPAddr is the address the management API is bound to, or "" when the
// node was started without one.
func (n *Node) HTTPAddr() string {
	if n.httpListener == nil {
		return ""
	}
	return n.httpListener.Addr().String()
}

// NATSAddr is the address the NATS listener is bound to, or "" when the
// node was started without one.
func (n *Node) NATSAddr() string {
	if n.natsListener == nil {
		return ""
	}
	return n.natsListener.Addr().String()
}

// KafkaAddr is the address the (first) Kafka listener is bound to, e.g.
// "127.0.0.1:41234" (with the real port when the config asked for port 0).
func (n *Node) KafkaAddr() string { return n.kafkaListeners[0].ln.Addr().String() }

// AMQPAddr is the address the AMQP listener is bound to, or "" when the
// node was started without one.
func (n *Node) AMQPAddr() string {
	if n.amqpListener == nil {
		return ""
	}
	return n.amqpListener.Addr().String()
}

// AdvertisedKafkaAddr is the host:port Metadata responses tell clients of
// the (first) Kafka listener to use.
func (n *Node) AdvertisedKafkaAddr() string { return n.advertisedKafka }

// Broker is the node's Kafka core.
func (n *Node) Broker() *broker.Broker { return n.cores.broker }

// Done is closed when a server (Kafka or AMQP) has stopped on its own,
// or the node was removed from its cluster (then Err says why), or when
// Close has stopped them all.
func (n *Node) Done() <-chan struct{} { return n.serveDone }

// Err is the error that stopped a server on its own, or the node's
// removal from its cluster; nil while they run and after a stop
// requested by Close.
func (n *Node) Err() error {
	n.errMu.Lock()
	defer n.errMu.Unlock()
	return n.serveErr
}

// Close shuts the node down. A cluster node first hands its leaderships
// to other nodes (shutdown.go). The HTTP management API stops first (it
// finishes requests in flight until ctx expires), then the NATS server,
// which holds nothing on the cores. Then the AMQP server: it closes its
// connections (connection.close 320 CONNECTION_FORCED) and returns their
// unacknowledged deliveries to the queues while the cores are still open.
// Then the Kafka server stops accepting and finishes in-flight requests
// (until ctx expires), and finally the cores are closed, the queueing core
// before the Kafka core, which fsyncs every log and writes the
// clean-shutdown markers; the data directory's lock is released last. The
// cores are closed even if ctx expires first. Calling Close again returns
// the first result.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		// In a cluster, the leaderships go first, while every
		// listener still serves (shutdown.go).
		n.handOffLeaderships(ctx)
		close(n.closing)
		var errs []error
		// The management API first: no policy change may reach the
		// registry while the rest shuts down.
		if n.httpServer != nil {
			if err := n.httpServer.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("node: shut down http server: %w", err))
			}
		}
		// NATS clients go first; JetStream's consumers stop with the
		// cores.
		if n.natsServer != nil {
			if err := n.natsServer.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("node: shut down nats server: %w", err))
			}
			if n.jetstreamAPI != nil {
				n.jetstreamAPI.Close()
			}
		}
		if n.amqpServer != nil {
			if err := n.amqpServer.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("node: shut down amqp server: %w", err))
			}
		}
		if err := n.kafkaServer.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("node: shut down kafka server: %w", err))
		}
		// Shutdown closed the listeners, so every Serve returns promptly;
		// wait for them so no goroutine of ours outlives Close.
		n.serving.Wait()
		n.markDone()
		// No request reaches the coordinators any more: stop their timers
		// before the logs they write to close. Transactions first: they
		// complete transactional offsets in the group coordinator.
		n.coordinating.Wait()
		if n.txns != nil {
			n.txns.Close()
			n.groups.Load().Close()
		}
		if err := n.cores.close(); err != nil {
			errs = append(errs, fmt.Errorf("node: close the cores: %w", err))
		}
		n.closeErr = errors.Join(errs...)
		n.logger.Info("node stopped", "err", n.closeErr)
	})
	return n.closeErr
}
