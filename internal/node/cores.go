package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/jetstream"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/replica"
	"github.com/wharf-mq/wharf/internal/streambridge"
)

// cores is what a node keeps in its data directory: the directory's lock,
// the Kafka core (internal/broker: topics, and the metadata log, which
// also holds the queueing core's definitions) and the queueing core
// (internal/mq), whose stream queues are Kafka topics
// (internal/streambridge), and the JetStream core, whose streams are
// Kafka topics too (jetstream.go). No core imports another: the rules
// between them are hooks installed here.
type cores struct {
	lock      *dirLock
	cluster   *clusterHost // nil on a single node
	broker    *broker.Broker
	queues    *mq.Registry
	jetstream *jetstream.Service // nil in a cluster, where JetStream is off (jetstream.go)
	jsState   replica.Log        // the JetStream core's state log, closed after it
}

// openCores takes the data directory's lock (one process per directory),
// then opens the Kafka core and the queueing core on it. On error nothing
// is left open. ctx bounds only a cluster node's wait for its metadata
// quorum.
func openCores(ctx context.Context, cfg Config, logger *slog.Logger) (*cores, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("node: lock data directory %s: %w", cfg.DataDir, err)
	}
	var (
		cluster       *clusterHost
		brokerCluster *broker.ClusterConfig
	)
	if cfg.Cluster != nil {
		if cluster, brokerCluster, err = startCluster(ctx, cfg, logger); err != nil {
			lock.release()
			return nil, err
		}
	}
	streamOwners := new(streambridge.Guard)
	streamLogsOwners := new(jetstreamGuard)
	b, err := broker.Open(broker.Config{
		DataDir:                 cfg.DataDir,
		NodeID:                  cmp.Or(cfg.NodeID, 1), // Kafka's sample server.properties: broker.id=1
		AutoCreateTopics:        cfg.AutoCreateTopics,
		DefaultPartitions:       cfg.DefaultPartitions,
		Fsync:                   cfg.Fsync,
		FlushInterval:           cfg.FlushInterval,
		RetentionCheck:          cfg.RetentionCheck,
		ScrubInterval:           cfg.ScrubInterval,
		ScrubBytesPerSecond:     cfg.ScrubBytesPerSecond,
		MinInsyncReplicas:       cfg.MinInsyncReplicas,
		AutoLeaderRebalance:     cfg.AutoLeaderRebalance,
		LeaderImbalanceCheck:    cfg.LeaderImbalanceCheck,
		MetadataLogSegmentBytes: cfg.MetadataLogSegmentBytes,
		Logger:                  logger.With("component", "broker"),
		TopicInUse: func(topic string) (string, bool) {
			if user, ok := streamOwners.TopicInUse(topic); ok {
				return user, ok
			}
			return streamLogsOwners.TopicInUse(topic)
		},
		QueueData: func() (int, string, error) { return mq.StoredQueues(cfg.DataDir) },
		Cluster:   brokerCluster,
	})
	if err != nil {
		cluster.close()
		lock.release()
		return nil, fmt.Errorf("node: open broker in %s: %w", cfg.DataDir, err)
	}
	cluster.acceptJoins(b)
	queues, err := mq.Open(mq.Config{
		DataDir:     cfg.DataDir,
		Definitions: b.Definitions(),
		Streams:     streambridge.NewTopics(b),
		Cluster:     mqCluster(cfg, b, brokerCluster, cluster),
		// Queue logs are scrubbed as partitions are, on the same schedule.
		ScrubInterval:       cfg.ScrubInterval,
		ScrubBytesPerSecond: cfg.ScrubBytesPerSecond,
		Logger:              logger.With("component", "mq"),
	})
	if err != nil {
		// Closed cleanly, so that the next start skips recovery.
		if cerr := b.Close(); cerr != nil {
			logger.Error("closing broker after failed start of the message queues", "err", cerr)
		}
		cluster.close()
		lock.release()
		return nil, fmt.Errorf("node: open message queues in %s: %w", cfg.DataDir, err)
	}
	streamOwners.Attach(queues)
	if cfg.Cluster != nil {
		// A node's removal shrinks its quorum queue replicas away first,
		// however it is asked for, and then drops its exclusive queues.
		b.OnRemoveNode(queues.PrepareRemoval)
	}
	c := &cores{lock: lock, cluster: cluster, broker: b, queues: queues}
	if cfg.Cluster != nil {
		reportJetStreamOff(b, logger)
		return c, nil
	}
	if c.jetstream, c.jsState, err = openJetStream(cfg, b, logger); err != nil {
		if cerr := errors.Join(queues.Close(), b.Close()); cerr != nil {
			logger.Error("closing the cores after a failed start of JetStream", "err", cerr)
		}
		cluster.close()
		lock.release()
		return nil, err
	}
	streamLogsOwners.svc.Store(c.jetstream)
	return c, nil
}

// close closes JetStream and the queueing core first: closing them may
// still write (JetStream's consumer state; auto-delete definitions to the
// metadata log), and both read the broker's topics. The lock goes last:
// another process may open the directory once it is free.
func (c *cores) close() error {
	err := errors.Join(c.closeJetStream(), c.queues.Close(), c.broker.Close())
	c.cluster.close() // after the broker closed every replica
	return errors.Join(err, c.lock.release())
}

// closeJetStream closes the JetStream core, then its state log, if they
// were opened.
func (c *cores) closeJetStream() error {
	if c.jetstream == nil {
		return nil
	}
	return errors.Join(c.jetstream.Close(), c.jsState.Close())
}
