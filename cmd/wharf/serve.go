package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/node"
)

// shutdownTimeout bounds how long `wharf serve` waits for in-flight requests
// after SIGINT/SIGTERM before closing the storage anyway.
const shutdownTimeout = 30 * time.Second

func runServe(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("serve", "[flags]",
		"Runs a Wharf broker until SIGINT or SIGTERM, then shuts down cleanly.\n"+
			"Every flag can also be set by its environment variable; a flag beats its variable.", std.err)
	dataDir := fs.String("data-dir", "./wharf-data", "directory for the metadata log and all partitions")
	kafkaAddr := fs.String("kafka-addr", ":9092", "Kafka listener address")
	amqpAddr := fs.String("amqp-addr", ":5672", "AMQP 0-9-1 listener address (empty: no AMQP listener)")
	httpAddr := fs.String("http-addr", ":15672", "HTTP management API address (RabbitMQ API subset; empty: none)")
	advertisedHost := fs.String("advertised-host", "", "host advertised to Kafka clients (default: the listener's host, or localhost for a wildcard listener)")
	fsync := fs.String("fsync", "acks-all", "when appends are fsynced: acks-all (before acks=all replies, group-committed), always (every append), interval (only every --flush-interval)")
	flushInterval := fs.Duration("flush-interval", time.Second, "period of the background fsync of everything written")
	autoCreate := fs.Bool("auto-create-topics", true, "create unknown topics on first produce or metadata request")
	numPartitions := fs.Int("num-partitions", 1, "partitions of auto-created topics and of topics created with the broker default")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	env := bindEnv(fs, "data-dir", "kafka-addr", "amqp-addr", "http-addr", "advertised-host",
		"fsync", "flush-interval", "auto-create-topics", "num-partitions", "log-level")

	positional, err := parseArgs(fs, args, env)
	if err != nil {
		return err
	}
	if err := expectArgs(positional, 0, ""); err != nil {
		return err
	}
	policy, err := broker.ParseFsyncPolicy(*fsync)
	if err != nil {
		return usagef("--fsync: %v", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	if *flushInterval <= 0 {
		return usagef("--flush-interval must be positive, got %v", *flushInterval)
	}
	if *numPartitions < 1 || *numPartitions > 1<<20 {
		return usagef("--num-partitions must be between 1 and %d, got %d", 1<<20, *numPartitions)
	}
	logger := slog.New(slog.NewTextHandler(std.err, &slog.HandlerOptions{Level: level}))

	n, err := node.Start(node.Config{
		DataDir:           *dataDir,
		KafkaAddr:         *kafkaAddr,
		AMQPAddr:          *amqpAddr,
		HTTPAddr:          *httpAddr,
		AdvertisedHost:    *advertisedHost,
		Fsync:             policy,
		FlushInterval:     *flushInterval,
		AutoCreateTopics:  autoCreate,
		DefaultPartitions: int32(*numPartitions),
		Logger:            logger,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(std.out, "Kafka listening on %s (advertised as %s)\n", n.KafkaAddr(), n.AdvertisedKafkaAddr())
	if n.AMQPAddr() != "" {
		fmt.Fprintf(std.out, "AMQP listening on %s\n", n.AMQPAddr())
	}
	if n.HTTPAddr() != "" {
		fmt.Fprintf(std.out, "HTTP management API listening on %s\n", n.HTTPAddr())
	}
	fmt.Fprintf(std.out, "Data directory %s\n", *dataDir)

	var serveErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "timeout", shutdownTimeout)
	case <-n.Done():
		serveErr = fmt.Errorf("kafka server stopped: %w", n.Err())
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := n.Close(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return serveErr
}
