package replica

import (
	"context"
	"time"

	"github.com/wharf-mq/wharf/internal/seglog"
)

// Log is one replicated log: a Kafka partition, the metadata log, a
// durable queue's logs. The doc of this package states the contract;
// Local is the single-node implementation. All methods are safe for
// concurrent use.
type Log interface {
	// Append writes batches (one or more v2 record batches, validated by
	// the caller) at the end of the log with consecutive offsets, stamped
	// with the leader's epoch. The batches are readable and the next
	// append goes after them once it returns; Appended.Ack says what the
	// writer's acknowledgement still waits for.
	Append(batches []byte, opt AppendOptions) (Appended, error)
	// AckFor is the Commit a writer's acknowledgement of the offsets
	// below upTo waits for under the log's fsync policy (see
	// AppendOptions.AckCommitted): for an append that wrote nothing, a
	// retried idempotent batch answered with its original offsets.
	AckFor(committed bool, upTo int64) Commit
	// Commit is the commit waiter of the offsets below upTo.
	Commit(upTo int64) Commit
	// Sync commits everything appended so far and returns once it is
	// committed. Its error speaks of that alone: what else an
	// implementation does on the way (Local records a recovery point) is
	// its own business.
	Sync() error

	// AppendAt writes batches that carry their offsets already, at the
	// leader epoch epoch, as a follower copies its leader: the first must
	// start at the end offset (else ErrOffsetMismatch), and epoch may not
	// be below the latest (ErrEpochRegressed). Every batch is verified
	// (CRC-32C). Appended.Ack is the Commit of the batches: a follower
	// tells its leader it has them once they are committed locally.
	AppendAt(batches []byte, epoch int32) (Appended, error)
	// TruncateTo removes every batch at or after offset, a batch boundary
	// in [StartOffset, EndOffset], and the epoch index entries from there
	// on. A follower cuts what diverged from its leader; only offsets
	// above the high watermark are ever cut. Commits of cut offsets fail
	// with ErrTruncated.
	TruncateTo(offset int64) error

	// StartOffset is the first offset that can be read.
	StartOffset() int64
	// HighWatermark is the offset below which consumers may read.
	HighWatermark() int64
	// EndOffset is the offset the next append gets.
	EndOffset() int64
	// Read returns whole batches from the one holding offset, up to
	// maxBytes but at least one batch, all below the high watermark.
	// offset == HighWatermark gives an empty Slice; outside [StartOffset,
	// HighWatermark] it is ErrOffsetOutOfRange. The caller releases the
	// Slice.
	Read(offset, maxBytes int64) (*Slice, error)
	// ReadBelow is Read without the batches whose base offset is at or
	// past limit (a read_committed fetch stops at the last stable offset).
	ReadBelow(offset, maxBytes, limit int64) (*Slice, error)

	// EpochAt is the leader epoch of the batch holding offset, in
	// [StartOffset, EndOffset): Raft's Term(i).
	EpochAt(offset int64) (int32, error)
	// Epochs is the epoch index: where each leader epoch above 0 begins.
	Epochs() []EpochStart

	Storage
}

// Storage is what a log does with its own replica's files: the same in
// every implementation, since a replicated log is still this replica's
// segmented log underneath. Retention, compaction and scrubbing run on
// every replica by itself, as in Kafka.
type Storage interface {
	// Size is the bytes the log's segments hold.
	Size() int64
	// OffsetForTime returns the first record whose timestamp is at least
	// ts (ListOffsets by time); found is false when there is none.
	OffsetForTime(ts int64) (offset, timestamp int64, found bool, err error)
	// MaxTimestamp returns the record with the largest timestamp.
	MaxTimestamp() (offset, timestamp int64)
	// DeleteBefore moves the log start offset to offset (DeleteRecords)
	// and returns it.
	DeleteBefore(offset int64) (startOffset int64, err error)
	// ApplyRetention deletes the closed segments retention.ms and
	// retention.bytes no longer keep.
	ApplyRetention(now time.Time) (deleted int, err error)
	// Compact runs one compaction pass if the config asks for compaction.
	Compact(ctx context.Context, now time.Time) (CompactStats, error)
	// Scrub reads the log back and verifies every batch; Corruption is
	// the damage it (or Open) found, which takes the log offline.
	Scrub(ctx context.Context, opt ScrubOptions) (ScrubStats, error)
	Corruption() error
	// SetConfig replaces the per-log settings.
	SetConfig(cfg Config)
	// Dir is the log's directory.
	Dir() string
	// Close makes everything durable and closes the log; Delete closes
	// it and removes its directory.
	Close() error
	Delete() error
}

// AppendOptions say how Append stamps and acknowledges a write.
type AppendOptions struct {
	// LogAppendTime > 0 stamps every batch with this time in ms
	// (message.timestamp.type=LogAppendTime).
	LogAppendTime int64
	// AckCommitted says the writer acknowledges the append only once it
	// is committed (Kafka acks=all); otherwise once it is written (acks 0
	// and 1, or a writer that waits for Commit or Sync itself). The
	// log's fsync policy maps that to Appended.Ack.
	AckCommitted bool
}

// Appended is where an append landed and what its acknowledgement waits
// for.
type Appended struct {
	BaseOffset    int64 // offset of the first record
	LastOffset    int64 // offset of the last record
	LogAppendTime int64 // the stamped time, -1 when batches keep their create time
	// Commit is the commit waiter of the batches.
	Commit Commit
	// Ack is what the writer waits for before it acknowledges the append
	// under the log's fsync policy: Commit, or the zero Commit when the
	// acknowledgement may go at once.
	Ack Commit
}

// The log's vocabulary, shared with its single-node storage.
type (
	// Slice is what a read returns: file ranges holding whole batches,
	// which WriteTo sends with sendfile(2) to a TCP connection. The
	// caller must Release it.
	Slice = seglog.Slice
	// Config is a log's settings, named after the Kafka topic configs.
	Config = seglog.Config
	// ScrubOptions and ScrubStats are a scrub's settings and outcome.
	ScrubOptions = seglog.ScrubOptions
	ScrubStats   = seglog.ScrubStats
	// CompactStats is the outcome of a compaction pass.
	CompactStats = seglog.CompactStats
	// Retainer decides what a compaction pass keeps, for a log whose
	// reader decides which record of a key holds its value.
	Retainer = seglog.Retainer
	// CorruptionError is damage found in the log's files: the log is
	// offline until an operator repairs it.
	CorruptionError = seglog.CorruptionError
	// EpochStart is an entry of the epoch index.
	EpochStart = seglog.EpochStart
)

// Errors of a Log (wrapped where the text says more).
var (
	// ErrClosed: the log was closed (deleted, or the node is stopping).
	// From Sync and Commit.Wait it means the data is not known committed.
	ErrClosed = seglog.ErrClosed
	// ErrOffsetOutOfRange: an offset outside the log.
	ErrOffsetOutOfRange = seglog.ErrOffsetOutOfRange
	// ErrOffsetMismatch: AppendAt's batches do not continue the log, or a
	// TruncateTo offset lies inside a batch.
	ErrOffsetMismatch = seglog.ErrOffsetMismatch
	// ErrEpochRegressed: an append at an epoch below the log's latest.
	ErrEpochRegressed = seglog.ErrEpochRegressed
	// ErrTruncated: a Commit of offsets TruncateTo cut.
	ErrTruncated = seglog.ErrTruncated
)

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config { return seglog.DefaultConfig() }
