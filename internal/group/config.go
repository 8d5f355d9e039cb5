package group

import (
	"log/slog"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
)

// Config configures a Coordinator. The zero value of every duration and
// count means Kafka's default, named in the field's comment.
type Config struct {
	// Broker stores __consumer_offsets and answers topic questions.
	Broker *broker.Broker

	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (3 s): how
	// long the first rebalance of an empty group waits for more members,
	// even if the members' rebalance timeout is shorter. Each member
	// joining in that time extends it by the delay again, for as long as
	// the rebalance timeout lasts beyond the first delay. A negative value
	// means no delay (Kafka's shipped server.properties sets 0).
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// classic member may ask for: group.min.session.timeout.ms (6 s) and
	// group.max.session.timeout.ms (30 min).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration

	// ConsumerSessionTimeout is group.consumer.session.timeout.ms (45 s),
	// the session timeout of KIP-848 members.
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms
	// (5 s), the heartbeat interval KIP-848 members are told to use.
	ConsumerHeartbeatInterval time.Duration

	// OffsetsRetention is offsets.retention.minutes (7 days): offsets of a
	// group that has been empty this long expire.
	OffsetsRetention time.Duration
	// RetentionCheckInterval is offsets.retention.check.interval.ms
	// (10 min): how often expired offsets are looked for.
	RetentionCheckInterval time.Duration

	// OffsetsTopicPartitions is offsets.topic.num.partitions, used only
	// when __consumer_offsets is created; an existing topic keeps its
	// count. Default 10: see DefaultOffsetsTopicPartitions.
	OffsetsTopicPartitions int32
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes (4096): the
	// longest metadata string a commit may carry.
	OffsetMetadataMaxBytes int

	// Now is the clock; nil means time.Now. Tests substitute a fake one.
	Now func() time.Time
	// Logger receives group events; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultOffsetsTopicPartitions is Wharf's offsets.topic.num.partitions.
// Kafka uses 50 to spread group coordination over the brokers of a
// cluster; on one node the partitions only split the log that is replayed
// at start and the append lock that commits of different groups share. Ten
// keep commits of unrelated groups from queueing behind one another's
// fsyncs without putting 50 directories (and 150 open files) into every
// data directory.
const DefaultOffsetsTopicPartitions = 10

// OffsetsTopic is the internal topic that holds committed offsets and group
// metadata.
const OffsetsTopic = "__consumer_offsets"

const (
	defaultInitialRebalanceDelay     = 3 * time.Second
	defaultMinSessionTimeout         = 6 * time.Second
	defaultMaxSessionTimeout         = 30 * time.Minute
	defaultConsumerSessionTimeout    = 45 * time.Second
	defaultConsumerHeartbeatInterval = 5 * time.Second
	defaultOffsetsRetention          = 7 * 24 * time.Hour
	defaultRetentionCheckInterval    = 10 * time.Minute
	defaultOffsetMetadataMaxBytes    = 4096
	// offsetsSegmentBytes is offsets.topic.segment.bytes: small segments
	// so that compaction (which never touches the active segment) can
	// reclaim superseded commits.
	offsetsSegmentBytes = "104857600"
)

func (c Config) withDefaults() Config {
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&c.InitialRebalanceDelay, defaultInitialRebalanceDelay)
	if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	set(&c.MinSessionTimeout, defaultMinSessionTimeout)
	set(&c.MaxSessionTimeout, defaultMaxSessionTimeout)
	set(&c.ConsumerSessionTimeout, defaultConsumerSessionTimeout)
	set(&c.ConsumerHeartbeatInterval, defaultConsumerHeartbeatInterval)
	set(&c.OffsetsRetention, defaultOffsetsRetention)
	set(&c.RetentionCheckInterval, defaultRetentionCheckInterval)
	if c.OffsetsTopicPartitions <= 0 {
		c.OffsetsTopicPartitions = DefaultOffsetsTopicPartitions
	}
	if c.OffsetMetadataMaxBytes <= 0 {
		c.OffsetMetadataMaxBytes = defaultOffsetMetadataMaxBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
