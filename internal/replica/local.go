package replica

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/seglog"
)

// Local is the single-node Log: one seglog log, the only replica there
// is. It leads forever: committed means fsynced (seglog's group commit,
// where concurrent waiters share fsyncs), and the high watermark is the
// end offset, as on a one-replica Kafka partition. Its appends carry the
// log's latest leader epoch, 0 unless AppendAt brought a later one.
type Local struct {
	log     *seglog.Log
	fsync   FsyncPolicy
	flusher *Flusher // nil: nothing flushes the log in the background
	logger  *slog.Logger
	epoch   atomic.Int32 // the epoch appends are stamped with

	// The flusher's state of this log (flusher.go): bytes appended
	// since its last flush began that no acknowledgement waited to see
	// committed, and whether the log is queued for an early flush.
	unflushed   atomic.Int64
	flushQueued atomic.Bool
}

var _ Log = (*Local)(nil)

// Options say how a Local acknowledges appends and who flushes it.
type Options struct {
	// Fsync maps AppendOptions.AckCommitted to Appended.Ack. The zero
	// value, FsyncOnAcksAll, is right for a log whose writers wait for
	// the commit themselves (the metadata log, queue stores).
	Fsync FsyncPolicy
	// Flusher, if not nil, fsyncs the log in the background (flusher.go).
	Flusher *Flusher
	// Logger (nil: slog.Default) gets the log's recovery and flush
	// failures.
	Logger *slog.Logger
}

// Open opens (creating if missing) the log in dir, recovering it as
// seglog.Open describes: a torn tail is cut, other damage is a
// *CorruptionError.
func Open(dir string, cfg Config, opt Options) (*Local, error) {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	sl, err := seglog.Open(dir, cfg, opt.Logger)
	if err != nil {
		return nil, err
	}
	l := &Local{log: sl, fsync: opt.Fsync, flusher: opt.Flusher, logger: opt.Logger}
	l.epoch.Store(sl.LatestEpoch())
	if l.flusher != nil {
		l.flusher.add(l)
	}
	return l, nil
}

// Append writes batches at the end of the log (see Log.Append).
func (l *Local) Append(batches []byte, opt AppendOptions) (Appended, error) {
	res, err := l.log.Append(batches, seglog.AppendOptions{LogAppendTime: opt.LogAppendTime, LeaderEpoch: l.epoch.Load()})
	if err != nil {
		return Appended{}, err
	}
	a := Appended{BaseOffset: res.BaseOffset, LastOffset: res.LastOffset, LogAppendTime: res.LogAppendTime,
		Commit: Commit{log: l, upTo: res.LastOffset + 1, cuts: res.Truncations}}
	if l.fsync.waitsForCommit(opt.AckCommitted) {
		a.Ack = a.Commit
	} else {
		l.noteUnflushed(int64(len(batches)))
	}
	return a, nil
}

// AckFor is the Commit an acknowledgement of the offsets below upTo waits
// for (see Log.AckFor).
func (l *Local) AckFor(committed bool, upTo int64) Commit {
	if !l.fsync.waitsForCommit(committed) {
		return Commit{}
	}
	return l.Commit(upTo)
}

// Commit is the commit waiter of the offsets below upTo as the log holds
// them now.
func (l *Local) Commit(upTo int64) Commit {
	return Commit{log: l, upTo: upTo, cuts: l.log.Truncations()}
}

func (l *Local) waitCommitted(ctx context.Context, upTo int64, cuts int) error {
	return l.log.WaitDurable(ctx, upTo, cuts)
}

// Sync fsyncs everything appended so far (group-committed with the other
// waiters) and, at most every 250 ms, writes the recovery point; a
// recovery point that cannot be written is logged, not returned (see
// seglog.Log.Sync).
func (l *Local) Sync() error { return l.log.Sync() }

// AppendAt writes a leader's batches at their offsets (see Log.AppendAt);
// appends after it carry epoch.
func (l *Local) AppendAt(batches []byte, epoch int32) (Appended, error) {
	res, err := l.log.AppendAt(batches, epoch)
	if err != nil {
		return Appended{}, err
	}
	l.epoch.Store(epoch)
	c := Commit{log: l, upTo: res.LastOffset + 1, cuts: res.Truncations}
	return Appended{BaseOffset: res.BaseOffset, LastOffset: res.LastOffset, LogAppendTime: -1, Commit: c, Ack: c}, nil
}

// appendVerified is AppendAt for batches verified already, lying in
// parts that are written in order (seglog.Log.AppendAtVerified): a Raft
// replica's, which its leader's callers validated (see Log.Append) and a
// transport between nodes checked on the way (raft.Transport).
func (l *Local) appendVerified(epoch int32, parts ...[]byte) error {
	if _, err := l.log.AppendAtVerified(epoch, parts...); err != nil {
		return err
	}
	l.epoch.Store(epoch)
	return nil
}

// TruncateTo cuts the log at offset (see Log.TruncateTo); appends after
// it carry the epoch of the last batch that stays.
func (l *Local) TruncateTo(offset int64) error {
	err := l.log.TruncateTo(offset)
	l.epoch.Store(l.log.LatestEpoch())
	return err
}

// StartOffset is the log start offset.
func (l *Local) StartOffset() int64 { return l.log.StartOffset() }

// HighWatermark is the end offset: on a single node every record written
// is as replicated as it will ever be.
func (l *Local) HighWatermark() int64 { return l.log.EndOffset() }

// EndOffset is the offset the next append gets.
func (l *Local) EndOffset() int64 { return l.log.EndOffset() }

// Read returns whole batches from the one holding offset (see Log.Read);
// below the end offset is below the high watermark.
func (l *Local) Read(offset, maxBytes int64) (*Slice, error) { return l.log.Read(offset, maxBytes) }

// ReadBelow is Read without the batches from limit on.
func (l *Local) ReadBelow(offset, maxBytes, limit int64) (*Slice, error) {
	return l.log.ReadBelow(offset, maxBytes, limit)
}

// EpochAt is the leader epoch of the batch holding offset.
func (l *Local) EpochAt(offset int64) (int32, error) { return l.log.EpochAt(offset) }

// Epochs is the epoch index.
func (l *Local) Epochs() []EpochStart { return l.log.Epochs() }

// Size is the bytes the log's segments hold.
func (l *Local) Size() int64 { return l.log.Size() }

// OffsetForTime returns the first record whose timestamp is at least ts.
func (l *Local) OffsetForTime(ts int64) (offset, timestamp int64, found bool, err error) {
	return l.log.OffsetForTime(ts)
}

// MaxTimestamp returns the record with the largest timestamp.
func (l *Local) MaxTimestamp() (offset, timestamp int64) { return l.log.MaxTimestamp() }

// DeleteBefore moves the log start offset to offset.
func (l *Local) DeleteBefore(offset int64) (int64, error) { return l.log.DeleteBefore(offset) }

// ApplyRetention deletes the closed segments retention no longer keeps.
func (l *Local) ApplyRetention(now time.Time) (int, error) { return l.log.ApplyRetention(now) }

// Compact runs one compaction pass.
func (l *Local) Compact(ctx context.Context, now time.Time) (CompactStats, error) {
	return l.log.CompactContext(ctx, now)
}

// Scrub verifies what recovery trusted (everything with opt.Full).
func (l *Local) Scrub(ctx context.Context, opt ScrubOptions) (ScrubStats, error) {
	return l.log.Scrub(ctx, opt)
}

// Corruption is the damage Scrub found, or nil.
func (l *Local) Corruption() error { return l.log.Corruption() }

// SetConfig replaces the log's settings.
func (l *Local) SetConfig(cfg Config) { l.log.SetConfig(cfg) }

// Dir is the log's directory.
func (l *Local) Dir() string { return l.log.Dir() }

// Close makes everything durable, writes the recovery point and the
// clean-shutdown marker, and closes the log.
func (l *Local) Close() error {
	l.leaveFlusher()
	return l.log.Close()
}

// Delete closes the log without a final sync and removes its directory.
func (l *Local) Delete() error {
	l.leaveFlusher()
	return l.log.Delete()
}

func (l *Local) leaveFlusher() {
	if l.flusher != nil {
		l.flusher.remove(l)
	}
}
