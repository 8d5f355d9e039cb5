// Package node runs one Wharf process and is its composition root: it
// takes the data directory's lock, opens the Kafka core (internal/broker)
// and the queueing core (internal/mq) side by side, joins them through the
// stream bridge (internal/streambridge) and hooks (cores.go), starts the
// Kafka coordinators, binds the protocol listeners and owns the goroutines
// that serve them. Each front end gets the core it serves: Kafka the
// broker and coordinators; AMQP and the management API the mq registry;
// NATS a subject router of its own. cmd/wharf and end-to-end tests start
// Wharf through this package and nothing else, so both exercise the same
// wiring.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/amqp"
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/httpapi"
	"github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/nats"
	"github.com/wharf-mq/wharf/internal/netserve"
	"github.com/wharf-mq/wharf/internal/replica"
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
	// AMQPAddr is the AMQP 0-9-1 listener's address, e.g. ":5672"; empty
	// binds nothing. Port 0 picks a free port; Node.AMQPAddr reports it.
	AMQPAddr string
	// AMQP tunes the AMQP front end (users, limits, alarms). Its DataDir
	// (watched by the disk alarm) defaults to DataDir and its Logger to
	// Logger.
	AMQP amqp.Config
	// HTTPAddr is the management API's address (RabbitMQ's HTTP API
	// subset, internal/httpapi), e.g. ":15672"; empty binds nothing. Port
	// 0 picks a free port; Node.HTTPAddr reports it. Its users are the
	// AMQP listener's (AMQP.Users, AMQP.LoopbackUsers).
	HTTPAddr string
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
	AutoCreateTopics    *bool // create unknown topics on first use (nil: true)
	DefaultPartitions   int32 // partitions of auto-created topics (0: broker default)
	MaxRequestBytes     int32 // largest Kafka request accepted (0: front-end default)

	// Kafka connection limits (see kafka.Config for each; 0 means the
	// Kafka front end's default).
	KafkaMaxNonProduceRequestBytes int32         // largest Kafka request but Produce
	KafkaQueuedMaxRequestBytes     int64         // memory of Kafka requests in flight (negative: unbounded)
	KafkaConnectionsMaxIdle        time.Duration // close idle Kafka connections after (negative: never)

	// MaxConnections caps the open connections of each listener (Kafka, NATS,
	// AMQP, HTTP): one more is closed at once (netserve.LimitListener).
	// 0: netserve.DefaultMaxConnections, an eighth of the open-file
	// limit; negative: no cap.
	MaxConnections int

	// Security is the user store's bootstrap administrator and the TLS
	// certificate; the zero value: guest/guest (loopback only), no TLS.
	Security SecurityConfig

	Logger *slog.Logger // nil: discard

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
	certs  *tlsconf.Reloader // nil without TLS

	kafkaListener   net.Listener
	kafkaServer     *kafka.Server
	groups          *group.Coordinator
	txns            *txn.Coordinator
	advertisedKafka string

	amqpListener net.Listener // nil when Config.AMQPAddr is empty
	amqpServer   *amqp.Server

	httpListener net.Listener // nil when Config.HTTPAddr is empty
	httpServer   *httpapi.Server

	natsListener net.Listener // nil when Config.NATSAddr is empty
	natsServer   *nats.Server

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
func Start(cfg Config) (*Node, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("node: empty data directory")
	}

	c, err := openCores(cfg, logger)
	if err != nil {
		return nil, err
	}
	b := c.broker
	// closeCores closes the cores after a failed start, so their logs get
	// their clean-shutdown markers and the next start skips recovery.
	closeCores := func(after string) {
		if cerr := c.close(); cerr != nil {
			logger.Error("closing the cores after "+after, "err", cerr)
		}
	}
	userStore, certs, err := openSecurity(cfg.Security, b)
	if err != nil {
		closeCores("failed start")
		return nil, err
	}

	ln, err := net.Listen("tcp", cfg.KafkaAddr)
	if err != nil {
		closeCores("failed listen")
		return nil, fmt.Errorf("node: listen for Kafka on %q: %w", cfg.KafkaAddr, err)
	}
	var amqpLn net.Listener
	if cfg.AMQPAddr != "" {
		if amqpLn, err = net.Listen("tcp", cfg.AMQPAddr); err != nil {
			ln.Close()
			closeCores("failed listen")
			return nil, fmt.Errorf("node: listen for AMQP on %q: %w", cfg.AMQPAddr, err)
		}
	}
	var httpLn net.Listener
	if cfg.HTTPAddr != "" {
		if httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			ln.Close()
			if amqpLn != nil {
				amqpLn.Close()
			}
			closeCores("failed listen")
			return nil, fmt.Errorf("node: listen for HTTP on %q: %w", cfg.HTTPAddr, err)
		}
	}
	natsLn, natsSrv, err := startNATS(cfg, logger)
	if err != nil {
		ln.Close()
		if amqpLn != nil {
			amqpLn.Close()
		}
		if httpLn != nil {
			httpLn.Close()
		}
		closeCores("failed listen")
		return nil, err
	}
	// The group coordinator rebuilds every group from __consumer_offsets
	// before the first request can reach it.
	groupCfg := cfg.Groups
	groupCfg.Broker = b
	groupCfg.Logger = logger
	groups, err := group.Open(groupCfg)
	if err != nil {
		ln.Close()
		if amqpLn != nil {
			amqpLn.Close()
		}
		if httpLn != nil {
			httpLn.Close()
		}
		if natsLn != nil {
			natsLn.Close()
		}
		closeCores("failed group coordinator start")
		return nil, fmt.Errorf("node: %w", err)
	}
	// The transaction coordinator rebuilds every transactional id from
	// __transaction_state and finishes the transactions a stop left
	// committing or aborting, before the first request can reach it.
	txnCfg := cfg.Transactions
	txnCfg.Broker, txnCfg.Groups, txnCfg.Logger = b, groups, logger
	txns, err := txn.Open(txnCfg)
	if err != nil {
		ln.Close()
		if amqpLn != nil {
			amqpLn.Close()
		}
		if httpLn != nil {
			httpLn.Close()
		}
		if natsLn != nil {
			natsLn.Close()
		}
		groups.Close()
		closeCores("failed transaction coordinator start")
		return nil, fmt.Errorf("node: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	host := AdvertisedHost(cfg.AdvertisedHost, cfg.KafkaAddr)

	n := &Node{
		cfg:             cfg,
		logger:          logger,
		cores:           c,
		users:           userStore,
		certs:           certs,
		groups:          groups,
		txns:            txns,
		kafkaListener:   ln,
		amqpListener:    amqpLn,
		httpListener:    httpLn,
		natsListener:    natsLn,
		natsServer:      natsSrv,
		advertisedKafka: net.JoinHostPort(host, strconv.Itoa(port)),
		serveDone:       make(chan struct{}),
		closing:         make(chan struct{}),
	}
	n.kafkaServer = kafka.NewServer(b, kafka.Config{
		AdvertisedHost:            host,
		AdvertisedPort:            int32(port),
		MaxRequestBytes:           cfg.MaxRequestBytes,
		MaxNonProduceRequestBytes: cfg.KafkaMaxNonProduceRequestBytes,
		QueuedMaxRequestBytes:     cfg.KafkaQueuedMaxRequestBytes,
		ConnectionsMaxIdle:        cfg.KafkaConnectionsMaxIdle,
		Logger:                    logger, // the server tags its lines component=kafka
		Groups:                    groups,
		Transactions:              txns,
	})
	n.serve("kafka", func() error { return n.kafkaServer.Serve(n.limited("kafka", n.kafkaListener)) })
	logger.Info("kafka listener started", "addr", n.KafkaAddr(), "advertised", n.advertisedKafka)

	if amqpLn != nil {
		amqpCfg := cfg.AMQP
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
		n.serve("amqp", func() error { return n.amqpServer.Serve(n.limited("amqp", amqpLn)) })
		logger.Info("amqp listener started", "addr", n.AMQPAddr())
	}
	if httpLn != nil {
		apiCfg := httpapi.Config{
			Users:         cfg.AMQP.Users,
			LoopbackUsers: cfg.AMQP.LoopbackUsers,
			Listeners:     []httpapi.Listener{{Protocol: "kafka", Addr: ln.Addr()}, {Protocol: "http", Addr: httpLn.Addr()}},
			Version:       version.String(),
			Logger:        logger.With("component", "http"),
		}
		if n.amqpServer != nil {
			apiCfg.AMQP = n.amqpServer
			apiCfg.Listeners = append(apiCfg.Listeners, httpapi.Listener{Protocol: "amqp", Addr: amqpLn.Addr()})
		}
		n.httpServer = httpapi.New(c.queues, apiCfg)
		n.serve("http", func() error { return n.httpServer.Serve(n.limited("http", httpLn)) })
		logger.Info("http listener started", "addr", n.HTTPAddr())
	}
	if natsLn != nil {
		n.serve("nats", func() error { return n.natsServer.Serve(n.limited("nats", natsLn)) })
		logger.Info("nats listener started", "addr", n.NATSAddr())
	}
	return n, nil
}

// startNATS binds the NATS listener and builds its server over a subject
// router of its own (Core NATS keeps nothing on the broker's logs), or
// returns nils when cfg.NATSAddr is empty.
func startNATS(cfg Config, logger *slog.Logger) (net.Listener, *nats.Server, error) {
	if cfg.NATSAddr == "" {
		return nil, nil, nil
	}
	natsCfg := cfg.NATS
	if natsCfg.Logger == nil {
		natsCfg.Logger = logger // the server tags its lines component=nats
	}
	srv, err := nats.NewServer(subjects.New(), natsCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.NATSAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("node: listen for NATS on %q: %w", cfg.NATSAddr, err)
	}
	return ln, srv, nil
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
		n.errMu.Lock()
		if n.serveErr == nil {
			n.serveErr = fmt.Errorf("%s server: %w", name, err)
		}
		n.errMu.Unlock()
		n.markDone()
	}()
}

// limited applies Config.MaxConnections to one listener, named in the
// log when it refuses connections.
func (n *Node) limited(name string, ln net.Listener) net.Listener {
	max := n.cfg.MaxConnections
	if max == 0 {
		max = netserve.DefaultMaxConnections()
	}
	return netserve.LimitListener(ln, max, name, n.logger)
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

// KafkaAddr is the address the Kafka listener is bound to, e.g.
// "127.0.0.1:41234" (with the real port when the config asked for port 0).
func (n *Node) KafkaAddr() string { return n.kafkaListener.Addr().String() }

// AMQPAddr is the address the AMQP listener is bound to, or "" when the
// node was started without one.
func (n *Node) AMQPAddr() string {
	if n.amqpListener == nil {
		return ""
	}
	return n.amqpListener.Addr().String()
}

// AdvertisedKafkaAddr is the host:port Metadata responses tell clients to use.
func (n *Node) AdvertisedKafkaAddr() string { return n.advertisedKafka }

// Broker is the node's Kafka core.
func (n *Node) Broker() *broker.Broker { return n.cores.broker }

// Done is closed when a server (Kafka or AMQP) has stopped on its own
// (then Err says why), or when Close has stopped them all.
func (n *Node) Done() <-chan struct{} { return n.serveDone }

// Err is the error that stopped a server on its own, or nil while they run
// and after a stop requested by Close.
func (n *Node) Err() error {
	n.errMu.Lock()
	defer n.errMu.Unlock()
	return n.serveErr
}

// Close shuts the node down. The HTTP management API stops first (it
// finishes requests in flight until ctx expires). Then the AMQP server: it closes its
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
		close(n.closing)
		var errs []error
		// The management API first: no policy change may reach the
		// registry while the rest shuts down.
		if n.httpServer != nil {
			if err := n.httpServer.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("node: shut down http server: %w", err))
			}
		}
		// NATS holds nothing on the broker: its clients go first.
		if n.natsServer != nil {
			if err := n.natsServer.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("node: shut down nats server: %w", err))
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
		n.txns.Close()
		n.groups.Close()
		if err := n.cores.close(); err != nil {
			errs = append(errs, fmt.Errorf("node: close the cores: %w", err))
		}
		n.closeErr = errors.Join(errs...)
		n.logger.Info("node stopped", "err", n.closeErr)
	})
	return n.closeErr
}
