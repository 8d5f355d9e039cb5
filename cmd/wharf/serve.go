package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/nats"
	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/replica"
)

// shutdownTimeout bounds how long `wharf serve` waits for in-flight requests
// after SIGINT/SIGTERM before closing the storage anyway.
const shutdownTimeout = 30 * time.Second

// The listeners' default addresses: every interface, the protocols' usual
// ports.
const (
	defaultKafkaAddr = ":9092"
	defaultAMQPAddr  = ":5672"
	defaultHTTPAddr  = ":15672"
	defaultNATSAddr  = ":4222"
)

func runServe(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("serve", "[flags]",
		"Runs a Wharf broker until SIGINT or SIGTERM, then shuts down cleanly. The default\n"+
			"listeners bind every interface; give 127.0.0.1:PORT to listen on loopback only.\n"+
			"Every flag can also be set by its environment variable; a flag beats its variable.", std.out)
	dataDir := fs.String("data-dir", "./wharf-data", "directory for the metadata log and all partitions")
	kafkaAddr := fs.String("kafka-addr", defaultKafkaAddr, "Kafka listener address")
	amqpAddr := fs.String("amqp-addr", defaultAMQPAddr, "AMQP 0-9-1 listener address (empty: no AMQP listener)")
	httpAddr := fs.String("http-addr", defaultHTTPAddr, "HTTP management API address (RabbitMQ API subset; empty: none)")
	advertisedHost := fs.String("advertised-host", "", "host advertised to Kafka clients (default: the listener's host, or localhost for a wildcard listener)")
	fsync := fs.String("fsync", "acks-all", "when appends are fsynced: acks-all (before acks=all replies, group-committed), always (every append), interval (only every --flush-interval)")
	flushInterval := fs.Duration("flush-interval", time.Second, "period of the background fsync of everything written")
	autoCreate := fs.Bool("auto-create-topics", true, "create unknown topics on first produce or metadata request")
	numPartitions := fs.Int("num-partitions", 1, "partitions of auto-created topics and of topics created without a count")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	scrubInterval := fs.Duration("scrub-interval", 0,
		"how often every log is read back and its CRCs checked in full, taking a corrupt partition offline; 0: once after start-up, only what recovery did not verify; negative: never")
	scrubRate := fs.Int64("scrub-bytes-per-second", 200<<20, "at most how fast the scrubber reads; 0: no cap")
	maxIdle := fs.Duration("kafka-connections-max-idle", kafka.DefaultConnectionsMaxIdle,
		"close a Kafka connection that completes no request and is written no response for this long (connections.max.idle.ms); 0: never")
	maxRequest := fs.Int("kafka-max-request-bytes", kafka.DefaultMaxRequestBytes,
		"largest Kafka request accepted (socket.request.max.bytes); a larger one closes its connection")
	maxNonProduce := fs.Int("kafka-max-non-produce-request-bytes", kafka.DefaultMaxNonProduceRequestBytes,
		"largest Kafka request other than Produce accepted (capped by --kafka-max-request-bytes)")
	queuedMax := fs.Int64("kafka-queued-max-request-bytes", kafka.DefaultQueuedMaxRequestBytes,
		"bytes of Kafka requests read and not yet answered, across all connections, plus what decoding them may allocate while they decode (like queued.max.request.bytes); a connection waits for room before its next request; 0: no bound")
	maxConns := fs.String("max-connections", "auto",
		"open connections per listener; one more is closed at once. auto: three eighths of the open-file limit shared by the listeners; 0: no cap")
	natsFlags := natsServeFlags(fs)
	secFlags := securityServeFlags(fs)
	tlsFlags := tlsListenerServeFlags(fs)
	kafkaSecFlags := kafkaSecurityServeFlags(fs)
	clusterFlags := clusterServeFlags(fs)
	env := bindEnv(fs, slices.Concat([]string{"data-dir", "kafka-addr", "amqp-addr", "http-addr", "advertised-host",
		"fsync", "flush-interval", "auto-create-topics", "num-partitions", "log-level",
		"kafka-connections-max-idle", "kafka-max-request-bytes", "kafka-max-non-produce-request-bytes",
		"kafka-queued-max-request-bytes", "scrub-interval", "scrub-bytes-per-second", "max-connections",
		"nats-addr", "nats-user", "nats-password", "nats-token", "nats-max-payload"}, securityEnv, tlsListenerEnv, kafkaSecurityEnv, clusterEnv)...)

	positional, err := parseArgs(fs, args, env)
	if err != nil {
		return err
	}
	if err := expectArgs(positional, 0, ""); err != nil {
		return err
	}
	policy, err := replica.ParseFsyncPolicy(*fsync)
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
	scrubRateCap, err := scrubBytesPerSecond(*scrubRate)
	if err != nil {
		return err
	}
	limits, err := kafkaLimits(*maxIdle, *maxRequest, *maxNonProduce, *queuedMax)
	if err != nil {
		return err
	}
	connCap, err := maxConnections(*maxConns)
	if err != nil {
		return err
	}
	natsCfg, err := natsFlags.config()
	if err != nil {
		return err
	}
	secCfg, err := secFlags.config()
	if err != nil {
		return err
	}
	amqpsAddr, httpsAddr, err := tlsFlags.addrs(fs, secCfg.TLS.Cert != "")
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(std.err, &slog.HandlerOptions{Level: level}))

	cfg := node.Config{
		DataDir:           *dataDir,
		KafkaAddr:         *kafkaAddr,
		AMQPAddr:          *amqpAddr,
		HTTPAddr:          *httpAddr,
		AMQPSAddr:         amqpsAddr,
		HTTPSAddr:         httpsAddr,
		NATSAddr:          *natsFlags.addr,
		NATS:              natsCfg,
		Security:          secCfg,
		AdvertisedHost:    *advertisedHost,
		Fsync:             policy,
		FlushInterval:     *flushInterval,
		AutoCreateTopics:  autoCreate,
		DefaultPartitions: int32(*numPartitions),
		Logger:            logger,

		ScrubInterval:       *scrubInterval,
		ScrubBytesPerSecond: scrubRateCap,

		MaxRequestBytes:                limits.MaxRequestBytes,
		KafkaMaxNonProduceRequestBytes: limits.MaxNonProduceRequestBytes,
		KafkaQueuedMaxRequestBytes:     limits.QueuedMaxRequestBytes,
		KafkaConnectionsMaxIdle:        limits.ConnectionsMaxIdle,
		MaxConnections:                 connCap,
	}
	if err := kafkaSecFlags.apply(fs, &cfg); err != nil {
		return err
	}
	if err := clusterFlags.apply(&cfg); err != nil {
		return err
	}
	n, err := node.StartContext(ctx, cfg)
	if err != nil {
		return err
	}
	for _, e := range n.KafkaEndpoints() {
		fmt.Fprintf(std.out, "Kafka listening on %s (%s, advertised as %s)\n", e.Addr, e.Protocol, e.Advertised)
	}
	if n.AMQPAddr() != "" {
		fmt.Fprintf(std.out, "AMQP listening on %s\n", n.AMQPAddr())
	}
	if n.AMQPSAddr() != "" {
		fmt.Fprintf(std.out, "AMQPS listening on %s\n", n.AMQPSAddr())
	}
	if n.HTTPAddr() != "" {
		fmt.Fprintf(std.out, "HTTP management API listening on %s\n", n.HTTPAddr())
	}
	if n.HTTPSAddr() != "" {
		fmt.Fprintf(std.out, "HTTPS management API listening on %s\n", n.HTTPSAddr())
	}
	if n.NATSAddr() != "" {
		fmt.Fprintf(std.out, "NATS listening on %s\n", n.NATSAddr())
	}
	fmt.Fprintf(std.out, "Data directory %s\n", *dataDir)

	// SIGHUP reloads the TLS certificate, as nginx and RabbitMQ's
	// rabbitmqctl eval ssl:clear_pem_cache() do, without a restart.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var serveErr error
	for serving := true; serving; {
		select {
		case <-hup:
			if err := n.ReloadTLS(); err != nil {
				logger.Error("reloading the TLS certificate failed; the previous one stays in use", "err", err)
			} else {
				logger.Info("reloaded the TLS certificate on SIGHUP")
			}
		case <-ctx.Done():
			logger.Info("shutting down", "timeout", stopTimeout(cfg))
			serving = false
		case <-n.Done():
			serveErr = n.Err() // names the listener that failed, e.g. "amqp server: accept tcp ..."
			serving = false
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), stopTimeout(cfg))
	defer cancel()
	if err := n.Close(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return serveErr
}

// stopTimeout is how long `wharf serve` may take to stop: a cluster
// node's controlled shutdown, then shutdownTimeout for the rest.
func stopTimeout(cfg node.Config) time.Duration {
	if cfg.Cluster == nil {
		return shutdownTimeout
	}
	return cfg.Cluster.ControlledShutdownTimeout + shutdownTimeout
}

// kafkaLimits checks the Kafka connection limit flags and turns them into
// the front end's settings, where a flag's 0 ("never", "no bound") is a
// negative value.
func kafkaLimits(maxIdle time.Duration, maxRequest, maxNonProduce int, queuedMax int64) (kafka.Config, error) {
	var cfg kafka.Config
	if maxIdle < 0 {
		return cfg, usagef("--kafka-connections-max-idle must not be negative, got %v", maxIdle)
	}
	if maxRequest < 1 || maxRequest > math.MaxInt32 {
		return cfg, usagef("--kafka-max-request-bytes must be between 1 and %d, got %d", math.MaxInt32, maxRequest)
	}
	if maxNonProduce < 1 || maxNonProduce > math.MaxInt32 {
		return cfg, usagef("--kafka-max-non-produce-request-bytes must be between 1 and %d, got %d", math.MaxInt32, maxNonProduce)
	}
	if queuedMax < 0 {
		return cfg, usagef("--kafka-queued-max-request-bytes must not be negative, got %d", queuedMax)
	}
	cfg.ConnectionsMaxIdle = maxIdle
	if maxIdle == 0 {
		cfg.ConnectionsMaxIdle = -1
	}
	cfg.MaxRequestBytes = int32(maxRequest)
	cfg.MaxNonProduceRequestBytes = int32(maxNonProduce)
	cfg.QueuedMaxRequestBytes = queuedMax
	if queuedMax == 0 {
		cfg.QueuedMaxRequestBytes = -1
	}
	return cfg, nil
}

// maxConnections turns --max-connections into the node's setting: "auto"
// is the node's 0 (its default share of the open-file limit), the flag's
// 0 ("no cap") the node's negative value.
func maxConnections(flag string) (int, error) {
	if flag == "auto" {
		return 0, nil
	}
	n, err := strconv.Atoi(flag)
	switch {
	case err != nil || n < 0:
		return 0, usagef("--max-connections must be auto or a number of connections (0: no cap), got %q", flag)
	case n == 0:
		return -1, nil
	}
	return n, nil
}

// scrubBytesPerSecond checks --scrub-bytes-per-second and turns its 0 ("no
// cap") into the broker's negative value (where 0 is its default).
func scrubBytesPerSecond(flag int64) (int64, error) {
	switch {
	case flag < 0:
		return 0, usagef("--scrub-bytes-per-second must not be negative, got %d", flag)
	case flag == 0:
		return -1, nil
	}
	return flag, nil
}

// natsFlags are the NATS listener's flags, named after nats-server's
// --user, --pass and --auth.
type natsFlags struct {
	addr, user, password, token *string
	maxPayload                  *int
}

func natsServeFlags(fs *flag.FlagSet) natsFlags {
	return natsFlags{
		addr:       fs.String("nats-addr", defaultNATSAddr, "NATS listener address, Core NATS and JetStream (empty: no NATS listener)"),
		user:       fs.String("nats-user", "", "user NATS clients must connect as (with --nats-password)"),
		password:   fs.String("nats-password", "", "password of --nats-user"),
		token:      fs.String("nats-token", "", "token NATS clients must connect with (instead of a user)"),
		maxPayload: fs.Int("nats-max-payload", nats.DefaultMaxPayload, "largest message a NATS client may publish (max_payload)"),
	}
}

// config checks the NATS flags and turns them into the front end's
// settings.
func (f natsFlags) config() (nats.Config, error) {
	var cfg nats.Config
	switch {
	case (*f.user == "") != (*f.password == ""):
		return cfg, usagef("--nats-user and --nats-password go together")
	case *f.user != "" && *f.token != "":
		return cfg, usagef("--nats-token and --nats-user exclude each other, as in nats-server")
	case *f.maxPayload < 1 || *f.maxPayload > nats.DefaultMaxPending:
		return cfg, usagef("--nats-max-payload must be between 1 and %d, got %d", nats.DefaultMaxPending, *f.maxPayload)
	}
	if *f.user != "" {
		cfg.Users = map[string]string{*f.user: *f.password}
	}
	cfg.Token = *f.token
	cfg.MaxPayload = *f.maxPayload
	return cfg, nil
}
