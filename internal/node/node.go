// Package node runs one Wharf process: it opens the broker core, binds the
// protocol listeners and owns the goroutines that serve them. cmd/wharf and
// end-to-end tests start a broker through this package and nothing else, so
// both exercise the same wiring.
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

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/kafka"
)

// Config describes one Wharf process. The zero value of a broker knob means
// the broker's default (see broker.Config).
type Config struct {
	DataDir string // where the metadata log and every partition live

	// KafkaAddr is the Kafka listener's address, e.g. ":9092". Port 0 picks a
	// free port; Node.KafkaAddr reports the one bound.
	KafkaAddr string
	// AMQPAddr and HTTPAddr are accepted for forward compatibility; their
	// listeners are not implemented yet and nothing is bound.
	AMQPAddr string
	HTTPAddr string

	// AdvertisedHost is the host clients are told to connect to in Metadata
	// responses. Empty: the listener's host, or "localhost" when the listener
	// binds every interface. The advertised port is always the bound port.
	AdvertisedHost string

	Fsync             broker.FsyncPolicy // when appends are fsynced (default: before acks=all replies)
	FlushInterval     time.Duration      // background fsync period (0: broker default)
	RetentionCheck    time.Duration      // retention sweep period (0: broker default)
	AutoCreateTopics  *bool              // create unknown topics on first use (nil: true)
	DefaultPartitions int32              // partitions of auto-created topics (0: broker default)
	MaxRequestBytes   int32              // largest Kafka request accepted (0: front-end default)

	Logger *slog.Logger // nil: discard
}

// Node is a running Wharf process. It owns the broker and the Kafka server
// goroutine; Close stops both.
type Node struct {
	cfg    Config
	logger *slog.Logger
	broker *broker.Broker

	kafkaListener   net.Listener
	kafkaServer     *kafka.Server
	advertisedKafka string

	serveDone chan struct{} // closed when the Kafka server's Serve returns
	serveErr  error         // Serve's result; read only after serveDone is closed

	closeOnce sync.Once
	closeErr  error
	closing   chan struct{} // closed when Close starts, so Serve's return is expected
}

// Start opens the broker in cfg.DataDir, binds the Kafka listener and starts
// serving it in a goroutine the Node owns. On error nothing is left running
// and the data directory is closed cleanly.
func Start(cfg Config) (*Node, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("node: empty data directory")
	}

	b, err := broker.Open(broker.Config{
		DataDir:           cfg.DataDir,
		AutoCreateTopics:  cfg.AutoCreateTopics,
		DefaultPartitions: cfg.DefaultPartitions,
		Fsync:             cfg.Fsync,
		FlushInterval:     cfg.FlushInterval,
		RetentionCheck:    cfg.RetentionCheck,
		Logger:            logger.With("component", "broker"),
	})
	if err != nil {
		return nil, fmt.Errorf("node: open broker in %s: %w", cfg.DataDir, err)
	}

	ln, err := net.Listen("tcp", cfg.KafkaAddr)
	if err != nil {
		// The broker is already open: close it so its logs get their
		// clean-shutdown markers and the next start skips recovery.
		if cerr := b.Close(); cerr != nil {
			logger.Error("closing broker after failed listen", "err", cerr)
		}
		return nil, fmt.Errorf("node: listen for Kafka on %q: %w", cfg.KafkaAddr, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	host := AdvertisedHost(cfg.AdvertisedHost, cfg.KafkaAddr)

	n := &Node{
		cfg:             cfg,
		logger:          logger,
		broker:          b,
		kafkaListener:   ln,
		advertisedKafka: net.JoinHostPort(host, strconv.Itoa(port)),
		serveDone:       make(chan struct{}),
		closing:         make(chan struct{}),
	}
	n.kafkaServer = kafka.NewServer(b, kafka.Config{
		AdvertisedHost:  host,
		AdvertisedPort:  int32(port),
		MaxRequestBytes: cfg.MaxRequestBytes,
		Logger:          logger, // the server tags its lines component=kafka
	})
	go n.serveKafka()

	logger.Info("kafka listener started", "addr", n.KafkaAddr(), "advertised", n.advertisedKafka)
	n.logNotImplemented("amqp", cfg.AMQPAddr)
	n.logNotImplemented("http", cfg.HTTPAddr)
	return n, nil
}

// serveKafka runs the Kafka server until Close shuts it down. An error
// before Close is logged; Done and Err report it.
func (n *Node) serveKafka() {
	defer close(n.serveDone)
	err := n.kafkaServer.Serve(n.kafkaListener)
	select {
	case <-n.closing:
		// Serve returning during Close is the expected way out.
		return
	default:
	}
	if err == nil {
		err = errors.New("kafka server stopped unexpectedly")
	}
	n.serveErr = err
	n.logger.Error("kafka server stopped", "err", err)
}

func (n *Node) logNotImplemented(listener, addr string) {
	if addr == "" {
		return
	}
	n.logger.Warn(listener+" listener is not implemented yet; nothing is bound", "addr", addr)
}

// KafkaAddr is the address the Kafka listener is bound to, e.g.
// "127.0.0.1:41234" (with the real port when the config asked for port 0).
func (n *Node) KafkaAddr() string { return n.kafkaListener.Addr().String() }

// AdvertisedKafkaAddr is the host:port Metadata responses tell clients to use.
func (n *Node) AdvertisedKafkaAddr() string { return n.advertisedKafka }

// Broker is the node's broker core.
func (n *Node) Broker() *broker.Broker { return n.broker }

// Done is closed when the Kafka server has stopped, either because Close was
// called or because it failed (then Err says why).
func (n *Node) Done() <-chan struct{} { return n.serveDone }

// Err is the error that stopped the Kafka server on its own, or nil while it
// runs and after a stop requested by Close.
func (n *Node) Err() error {
	select {
	case <-n.serveDone:
		return n.serveErr
	default:
		return nil
	}
}

// Close shuts the node down: the Kafka server stops accepting and finishes
// in-flight requests (until ctx expires), then the broker is closed, which
// fsyncs every log and writes its clean-shutdown markers. The broker is
// closed even if ctx expires first. Calling Close again returns the first
// result.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		close(n.closing)
		var errs []error
		if err := n.kafkaServer.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("node: shut down kafka server: %w", err))
		}
		// Shutdown closed the listener, so Serve returns promptly; wait
		// for it so no goroutine of ours outlives Close.
		<-n.serveDone
		if err := n.broker.Close(); err != nil {
			errs = append(errs, fmt.Errorf("node: close broker: %w", err))
		}
		n.closeErr = errors.Join(errs...)
		n.logger.Info("node stopped", "err", n.closeErr)
	})
	return n.closeErr
}
