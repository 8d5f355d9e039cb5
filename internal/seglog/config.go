package seglog

import "math"

// Config holds the per-log settings, named after the Kafka topic configs
// they implement. The zero value of a size or time field means "use the
// default"; RetentionMs and RetentionBytes take -1 (any negative value) for
// "no limit". The compaction fields are the exception: 0 is a meaningful
// value for each of them, so they are taken literally and DefaultConfig
// sets Kafka's defaults.
type Config struct {
	// SegmentBytes is segment.bytes: the active segment is rolled when an
	// append would take it past this size. Capped at math.MaxInt32 because
	// index entries store 32-bit file positions. Default 1 GiB.
	SegmentBytes int64
	// SegmentMs is segment.ms: on append, the active segment is rolled once
	// it is older than this. Default 7 days.
	SegmentMs int64
	// IndexIntervalBytes is index.interval.bytes: one offset-index entry per
	// roughly this many bytes of batches. Default 4096.
	IndexIntervalBytes int32
	// RetentionMs is retention.ms: closed segments whose largest timestamp is
	// older than this are deleted by ApplyRetention. Default 7 days; -1 keeps
	// data forever.
	RetentionMs int64
	// RetentionBytes is retention.bytes for this one log: ApplyRetention
	// deletes the oldest closed segments while the log would still hold at
	// least this many bytes without them. Default -1 (unlimited).
	RetentionBytes int64

	// Compact and Delete are cleanup.policy: "compact" lets Compact remove
	// superseded records, "delete" lets ApplyRetention delete old segments.
	// Both may be set. A Config with neither means "delete", Kafka's default.
	Compact bool
	Delete  bool
	// DeleteRetentionMs is delete.retention.ms: how long a tombstone (a
	// record with a null value) outlives, in a compacted log, the largest
	// timestamp of the segment holding it. Kafka's default is 86400000.
	DeleteRetentionMs int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: Compact rewrites
	// the log only when the not-yet-compacted bytes are at least this share
	// of the compactable bytes. Kafka's default is 0.5.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms: a closed segment whose
	// largest timestamp is younger than this, and everything after it, is
	// left alone. Default 0.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms: when the oldest record
	// not yet compacted is older than this, Compact runs whatever the dirty
	// ratio, and the active segment of a compacted log is rolled once it is
	// this old. 0 (or negative) means no limit, Kafka's default.
	MaxCompactionLagMs int64
	// ProducerIDExpirationMs is the broker's producer.id.expiration.ms:
	// compaction keeps what the log needs of each idempotent producer's
	// last batch (compact_producers.go) until the batch's largest timestamp
	// is this old. 0 means Kafka's default, 86400000.
	ProducerIDExpirationMs int64
}

const (
	defaultSegmentBytes       = 1 << 30
	defaultSegmentMs          = 7 * 24 * 60 * 60 * 1000
	defaultIndexIntervalBytes = 4096
	defaultRetentionMs        = 7 * 24 * 60 * 60 * 1000

	defaultDeleteRetentionMs      = 24 * 60 * 60 * 1000
	defaultMinCleanableDirtyRatio = 0.5
	defaultProducerIDExpirationMs = 24 * 60 * 60 * 1000
)

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       defaultSegmentBytes,
		SegmentMs:          defaultSegmentMs,
		IndexIntervalBytes: defaultIndexIntervalBytes,
		RetentionMs:        defaultRetentionMs,
		RetentionBytes:     -1,

		Delete:                 true,
		DeleteRetentionMs:      defaultDeleteRetentionMs,
		MinCleanableDirtyRatio: defaultMinCleanableDirtyRatio,
		ProducerIDExpirationMs: defaultProducerIDExpirationMs,
	}
}

// normalized fills zero fields with defaults and clamps what the file
// formats cannot represent.
func (c Config) normalized() Config {
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = defaultSegmentBytes
	}
	if c.SegmentBytes > math.MaxInt32 {
		c.SegmentBytes = math.MaxInt32
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = defaultSegmentMs
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = defaultIndexIntervalBytes
	}
	if !c.Compact && !c.Delete {
		c.Delete = true
	}
	if c.ProducerIDExpirationMs <= 0 {
		c.ProducerIDExpirationMs = defaultProducerIDExpirationMs
	}
	return c
}

// rollMs is how old the active segment may get before an append rolls it:
// segment.ms, or max.compaction.lag.ms if that is shorter and the log is
// compacted (the active segment is never compacted, so its records could
// otherwise stay uncompacted past the limit), as in Kafka.
func (c Config) rollMs() int64 {
	if c.Compact && c.MaxCompactionLagMs > 0 {
		return min(c.SegmentMs, c.MaxCompactionLagMs)
	}
	return c.SegmentMs
}
