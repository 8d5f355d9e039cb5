package broker

import (
	"log/slog"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// Config holds the broker-wide settings. The zero value of a field means
// its default.
type Config struct {
	DataDir           string
	NodeID            int32
	AutoCreateTopics  *bool               // auto.create.topics.enable; nil means true
	DefaultPartitions int32               // num.partitions; default 1
	MessageMaxBytes   int32               // message.max.bytes; default 1048588
	Fsync             replica.FsyncPolicy // which acknowledgements wait for an fsync; default acks-all
	FlushInterval     time.Duration       // background fsync period (replica.Flusher); default 1s
	RetentionCheck    time.Duration       // log.retention.check.interval.ms; default 5m
	// ScrubInterval is how often every partition's log is read back and
	// verified in full (scrubber.go). 0, the default, scrubs only once
	// after start-up, and only what the log's recovery did not verify;
	// negative never scrubs.
	ScrubInterval time.Duration
	// ScrubBytesPerSecond caps the scrubber's reads; default 200 MB/s,
	// negative for no cap.
	ScrubBytesPerSecond int64
	Logger              *slog.Logger
	// MetadataLogSegmentBytes is metadata.log.segment.bytes: the segment
	// size of the metadata log, which the log cleaner compacts a closed
	// segment at a time; default 8 MiB (Kafka's floor for it; its
	// default, 1 GiB, would keep a metadata log uncompacted until it
	// held a gigabyte).
	MetadataLogSegmentBytes int64

	// MinInsyncReplicas is the broker default of the topic config
	// min.insync.replicas: an acks=all produce to a partition with fewer
	// replicas in sync is refused (NOT_ENOUGH_REPLICAS). 0: min(2, the
	// topic's replication factor).
	MinInsyncReplicas int
	// AutoLeaderRebalance (auto.leader.rebalance.enable; nil means true)
	// moves, in a cluster, the leadership of each partition back to its
	// preferred replica, every LeaderImbalanceCheck
	// (leader.imbalance.check.interval.seconds; default 300 s), as
	// Kafka's controller does (balance.go).
	AutoLeaderRebalance  *bool
	LeaderImbalanceCheck time.Duration

	// TopicInUse names what outside the Kafka core keeps its data in
	// topic (a stream queue: "queue 'q' in vhost '/'"), if anything
	// does: Kafka clients may then neither delete the topic nor change
	// its partition count, either of which would break that user. The
	// node installs it (internal/streambridge); nil: no topic is in use.
	TopicInUse func(topic string) (user string, inUse bool)
	// QueueData counts the durable queues that have data in DataDir and
	// names the directory holding it (the node installs the queue
	// store's count). The metadata log defines those queues too, so a
	// missing or empty metadata log beside such data refuses the start,
	// as it does beside partitions (metadata_loss.go); nil: no queue data.
	QueueData func() (queues int, dir string, err error)

	// Cluster makes the broker a node of a cluster (cluster.go); nil: a
	// single node, as before.
	Cluster *ClusterConfig
}

const (
	defaultMessageMaxBytes = 1048588
	defaultFlushInterval   = time.Second
	defaultRetentionCheck  = 5 * time.Minute
	defaultScrubRate       = 200 << 20
	// defaultMetadataLogSegmentBytes is 8 MiB, Kafka's minimum of
	// metadata.log.segment.bytes.
	defaultMetadataLogSegmentBytes = 8 << 20
	// defaultLeaderImbalanceCheck is Kafka's
	// leader.imbalance.check.interval.seconds.
	defaultLeaderImbalanceCheck = 300 * time.Second
)

func (c Config) withDefaults() Config {
	if c.AutoCreateTopics == nil {
		on := true
		c.AutoCreateTopics = &on
	}
	if c.DefaultPartitions <= 0 {
		c.DefaultPartitions = 1
	}
	if c.MessageMaxBytes <= 0 {
		c.MessageMaxBytes = defaultMessageMaxBytes
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = defaultFlushInterval
	}
	if c.RetentionCheck <= 0 {
		c.RetentionCheck = defaultRetentionCheck
	}
	if c.MetadataLogSegmentBytes <= 0 {
		c.MetadataLogSegmentBytes = defaultMetadataLogSegmentBytes
	}
	if c.AutoLeaderRebalance == nil {
		on := true
		c.AutoLeaderRebalance = &on
	}
	if c.LeaderImbalanceCheck <= 0 {
		c.LeaderImbalanceCheck = defaultLeaderImbalanceCheck
	}
	if c.ScrubBytesPerSecond == 0 {
		c.ScrubBytesPerSecond = defaultScrubRate
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
