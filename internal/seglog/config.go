package seglog

import "math"

// Config holds the per-log settings, named after the Kafka topic configs
// they implement. The zero value of a field means "use the default";
// RetentionMs and RetentionBytes take -1 (any negative value) for "no limit".
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
}

const (
	defaultSegmentBytes       = 1 << 30
	defaultSegmentMs          = 7 * 24 * 60 * 60 * 1000
	defaultIndexIntervalBytes = 4096
	defaultRetentionMs        = 7 * 24 * 60 * 60 * 1000
)

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       defaultSegmentBytes,
		SegmentMs:          defaultSegmentMs,
		IndexIntervalBytes: defaultIndexIntervalBytes,
		RetentionMs:        defaultRetentionMs,
		RetentionBytes:     -1,
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
	return c
}
