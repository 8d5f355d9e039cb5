package seglog

import (
	"math"
	"time"
)

// DeleteBefore is DeleteRecords: it advances the log start offset to offset
// and deletes the closed segments wholly below it. The new start offset is
// persisted (with a directory fsync) before any file is unlinked, so a crash
// cannot bring deleted records back. offset < 0 or > EndOffset is
// ErrOffsetOutOfRange; an offset at or below the start is a no-op. Returns
// the start offset.
func (l *Log) DeleteBefore(offset int64) (startOffset int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if offset < 0 || offset > l.end {
		return l.start, ErrOffsetOutOfRange
	}
	if offset <= l.start {
		return l.start, nil
	}
	if err := l.advanceStartLocked(offset); err != nil {
		return l.start, err
	}
	return l.start, l.dropSegmentsBelowStartLocked()
}

// ApplyRetention deletes the oldest closed segments while either limit
// applies: retention.ms (now minus the segment's largest timestamp, or its
// file's modification time when no batch has a timestamp, exceeds
// RetentionMs) or retention.bytes (the log would still hold at least
// RetentionBytes without the segment). The active segment is never deleted.
// The start offset moves to the first remaining segment. Returns how many
// segments were deleted. A log whose cleanup policy lacks "delete"
// (Config.Delete) is left alone: a compact-only topic keeps its data until
// compaction removes it.
func (l *Log) ApplyRetention(now time.Time) (deleted int, err error) {
	return l.ApplyRetentionBelow(now, math.MaxInt64)
}

// ApplyRetentionBelow is ApplyRetention that deletes no segment holding
// offsets at or past limit: a replicated log's retention stops at its
// high watermark, as Kafka's does, so that only committed records go.
func (l *Log) ApplyRetentionBelow(now time.Time, limit int64) (deleted int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if !l.cfg.Delete {
		return 0, nil
	}
	total := l.sizeLocked()
	n := 0
	for ; n < len(l.segments)-1 && l.segments[n].next <= limit; n++ {
		s := l.segments[n]
		expired := l.cfg.RetentionMs >= 0 && now.UnixMilli()-s.largestTimestamp() > l.cfg.RetentionMs
		oversize := l.cfg.RetentionBytes >= 0 && total-s.size >= l.cfg.RetentionBytes
		if !expired && !oversize {
			break
		}
		total -= s.size
	}
	if n == 0 {
		return 0, nil
	}
	if newStart := l.segments[n].base; newStart > l.start {
		if err := l.advanceStartLocked(newStart); err != nil {
			return 0, err
		}
	}
	before := len(l.segments)
	err = l.dropSegmentsBelowStartLocked()
	return before - len(l.segments), err
}

// advanceStartLocked persists and sets a new log start offset, and trims
// the epoch index to it.
func (l *Log) advanceStartLocked(offset int64) error {
	if err := writeOffsetFile(l.dir, startOffsetFile, offset, true); err != nil {
		return err
	}
	l.start = offset
	if l.epochs.truncateFromStart(offset) {
		if err := l.writeEpochsLocked(); err != nil {
			// The file only keeps entries below the start, which Open
			// trims again.
			l.logger.Warn("trimming the leader epoch index failed", "err", err)
		}
	}
	return nil
}

// dropSegmentsBelowStartLocked deletes the closed segments whose offsets all
// lie below the start offset. Their files are unlinked now; descriptors
// close when the last Slice reading them is released.
func (l *Log) dropSegmentsBelowStartLocked() error {
	n := 0
	for n < len(l.segments)-1 && l.segments[n].next <= l.start {
		n++
	}
	dropped := l.segments[:n]
	l.segments = append([]*segment(nil), l.segments[n:]...)
	for _, s := range dropped {
		l.logger.Debug("deleting segment", "file", s.logPath, "base", s.base, "next", s.next)
	}
	return discardSegments(dropped)
}
