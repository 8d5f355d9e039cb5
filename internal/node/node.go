// Package node runs one Wharf process: it opens the broker core, binds the
// protocol listeners and owns the goroutines that serve them. cmd/wharf and
// end-to-end tests start a broker through this package and nothing else, so
// both exercise the same wiring.
package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/amqp"
	"github.com/wharf-mq/wharf/internal/authlimit"
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/httpapi"
	"github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/nats"
	"github.com/wharf-mq/wharf/internal/netserve"
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

	Fsync          broker.FsyncPolicy // when appends are fsynced (default: before acks=all replies)
	FlushInterval  time.Duration      // background fsync period (0: broker default)
	RetentionCheck time.Duration      // retention sweep period (0: broker default)
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

// Node is a running Wharf process. It owns the broker and the goroutines
// serving the Kafka and AMQP listeners; Close stops them all.
type Node struct {
	cfg    Config
	logger *slog.Logger
	broker *broker.Broker
	users  *users.Store
	certs  *tlsconf.Reloader // nil without TLS

	logins *authlimit.Limiter // failed logins per address, shared by every protocol
	// kafkaAccess is the Kafka listeners' ACLs and client quotas.
	kafkaAccess kafkaAccess

	kafkaListeners  boundKafkaListeners // at least one
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

// Start opens the broker in cfg.DataDir, binds the Kafka listener (and the
// AMQP one if cfg.AMQPAddr is set) and serves each in a goroutine the Node
// owns. On error nothing is left running and the data directory is closed
// cleanly.
func Start(cfg Config) (*Node, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("node: empty data directory")
	}

	var access kafkaAccess
	b, err := broker.Open(broker.Config{
		DataDir:             cfg.DataDir,
		NodeID:              cmp.Or(cfg.NodeID, 1),
		AutoCreateTopics:    cfg.AutoCreateTopics,
		DefaultPartitions:   cfg.DefaultPartitions,
		Fsync:               cfg.Fsync,
		FlushInterval:       cfg.FlushInterval,
		RetentionCheck:      cfg.RetentionCheck,
		ScrubInterval:       cfg.ScrubInterval,
		ScrubBytesPerSecond: cfg.ScrubBytesPerSecond,
		Logger:              logger.With("component", "broker"),
	})
	if err != nil {
		return nil, fmt.Errorf("node: open broker in %s: %w", cfg.DataDir, err)
	}
	userStore, certs, err := openSecurity(cfg.Security, b)
	if err == nil {
		access, err = openKafkaAccess(cfg.KafkaSecurity, b)
	}
	if err != nil {
		if cerr := b.Close(); cerr != nil {
			logger.Error("closing broker after failed start", "err", cerr)
		}
		return nil, err
	}

	ln, err := listenKafka(cfg, certs)
	if err != nil {
		// The broker is already open: close it so its logs get their
		// clean-shutdown markers and the next start skips recovery.
		if cerr := b.Close(); cerr != nil {
			logger.Error("closing broker after failed listen", "err", cerr)
		}
		return nil, err
	}
	var amqpLn net.Listener
	if cfg.AMQPAddr != "" {
		if amqpLn, err = net.Listen("tcp", cfg.AMQPAddr); err != nil {
			ln.close()
			if cerr := b.Close(); cerr != nil {
				logger.Error("closing broker after failed listen", "err", cerr)
			}
			return nil, fmt.Errorf("node: listen for AMQP on %q: %w", cfg.AMQPAddr, err)
		}
	}
	var httpLn net.Listener
	if cfg.HTTPAddr != "" {
		if httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			ln.close()
			if amqpLn != nil {
				amqpLn.Close()
			}
			if cerr := b.Close(); cerr != nil {
				logger.Error("closing broker after failed listen", "err", cerr)
			}
			return nil, fmt.Errorf("node: listen for HTTP on %q: %w", cfg.HTTPAddr, err)
		}
	}
	natsLn, natsSrv, err := startNATS(cfg, logger)
	if err != nil {
		ln.close()
		if amqpLn != nil {
			amqpLn.Close()
		}
		if httpLn != nil {
			httpLn.Close()
		}
		if cerr := b.Close(); cerr != nil {
			logger.Error("closing broker after failed listen", "err", cerr)
		}
		return nil, err
	}
	// The group coordinator rebuilds every group from __consumer_offsets
	// before the first request can reach it.
	groupCfg := cfg.Groups
	groupCfg.Broker = b
	groupCfg.Logger = logger
	groups, err := group.Open(groupCfg)
	if err != nil {
		ln.close()
		if amqpLn != nil {
			amqpLn.Close()
		}
		if httpLn != nil {
			httpLn.Close()
		}
		if natsLn != nil {
			natsLn.Close()
		}
		if cerr := b.Close(); cerr != nil {
			logger.Error("closing broker after failed group coordinator start", "err", cerr)
		}
		return nil, fmt.Errorf("node: %w", err)
	}
	// The transaction coordinator rebuilds every transactional id from
	// __transaction_state and finishes the transactions a stop left
	// committing or aborting, before the first request can reach it.
	txnCfg := cfg.Transactions
	txnCfg.Broker, txnCfg.Groups, txnCfg.Logger = b, groups, logger
	txns, err := txn.Open(txnCfg)
	if err != nil {
		ln.close()
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
		if cerr := b.Close(); cerr != nil {
			logger.Error("closing broker after failed transaction coordinator start", "err", cerr)
		}
		return nil, fmt.Errorf("node: %w", err)
	}
	n := &Node{
		cfg:             cfg,
		logger:          logger,
		broker:          b,
		users:           userStore,
		certs:           certs,
		logins:          authlimit.New(authlimit.Config{}),
		kafkaAccess:     access,
		groups:          groups,
		txns:            txns,
		kafkaListeners:  ln,
		amqpListener:    amqpLn,
		httpListener:    httpLn,
		natsListener:    natsLn,
		natsServer:      natsSrv,
		advertisedKafka: ln[0].advertised(),
		serveDone:       make(chan struct{}),
		closing:         make(chan struct{}),
	}
	n.kafkaServer = kafka.NewServer(b, n.kafkaConfig())
	n.serveKafka(cfg.Security.TLS.ClientCA != "")

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
		n.amqpServer = amqp.NewServer(b.Messaging(), amqpCfg)
		n.serve("amqp", func() error { return n.amqpServer.Serve(n.limited("amqp", amqpLn)) })
		logger.Info("amqp listener started", "addr", n.AMQPAddr())
	}
	if httpLn != nil {
		apiCfg := httpapi.Config{
			Users:         cfg.AMQP.Users,
			LoopbackUsers: cfg.AMQP.LoopbackUsers,
			Listeners:     []httpapi.Listener{{Protocol: "kafka", Addr: ln[0].ln.Addr()}, {Protocol: "http", Addr: httpLn.Addr()}},
			Version:       version.String(),
			Logger:        logger.With("component", "http"),
		}
		if n.amqpServer != nil {
			apiCfg.AMQP = n.amqpServer
			apiCfg.Listeners = append(apiCfg.Listeners, httpapi.Listener{Protocol: "amqp", Addr: amqpLn.Addr()})
		}
		n.httpServer = httpapi.New(b.Messaging(), apiCfg)
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

// Broker is the node's broker core.
func (n *Node) Broker() *broker.Broker { return n.broker }

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
// unacknowledged deliveries to the queues while the broker is still open.
// Then the Kafka server stops accepting and finishes in-flight requests
// (until ctx expires), and finally the broker is closed, which fsyncs every
// log and writes its clean-shutdown markers. The broker is closed even if
// ctx expires first. Calling Close again returns the first result.
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
		if err := n.broker.Close(); err != nil {
			errs = append(errs, fmt.Errorf("node: close broker: %w", err))
		}
		n.closeErr = errors.Join(errs...)
		n.logger.Info("node stopped", "err", n.closeErr)
	})
	return n.closeErr
}
