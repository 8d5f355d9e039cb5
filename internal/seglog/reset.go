package seglog

import (
	"fmt"
	"os"
)

// ResetTo empties the log and starts it again at offset, which may lie
// beyond its end: what a replica does when it lags so far behind that its
// leader no longer has the records that would continue its log (Kafka's
// truncateFullyAndStartAt). Commits of the offsets it had fail with
// ErrTruncated. It waits for a compaction pass in progress.
//
// The segments are unlinked and a new empty segment at offset created, the
// directory fsynced, and only then the start offset and recovery point
// written: a crash before that leaves the new segment as the only one, and
// Open starts the log at its base. A crash while the old segments are
// being unlinked leaves some of them, which the caller must be ready to
// reset again (a replicated log records that it is resetting first).
func (l *Log) ResetTo(offset int64) error {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	l.checkpointMu.Lock()
	defer l.checkpointMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.committing {
		l.syncDone.Wait() // a round in flight would mark offsets of the old log durable
	}
	if err := l.writableLocked(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: cannot reset to %d", ErrOffsetOutOfRange, offset)
	}
	l.cuts = append(l.cuts, l.start)
	l.start, l.end = offset, offset
	l.synced, l.wanted = min(l.synced, offset), min(l.wanted, offset)
	l.epochs = epochIndex{}
	l.cleanerOffset = 0
	l.syncDone.Broadcast()

	old := l.segments
	l.segments = nil
	if err := discardSegments(old); err != nil {
		return l.failReset(err)
	}
	if err := l.addSegmentLocked(); err != nil { // fsyncs the directory
		return l.failReset(err)
	}
	for _, name := range []string{epochFile, cleanerOffsetFile} {
		if err := os.Remove(l.path(name)); err != nil && !os.IsNotExist(err) {
			return l.failReset(err)
		}
	}
	if err := writeOffsetFile(l.dir, startOffsetFile, offset, false); err != nil {
		return l.failReset(err)
	}
	if err := writeOffsetFile(l.dir, recoveryPointFile, offset, true); err != nil {
		return l.failReset(err)
	}
	l.checkpointed = offset
	l.markSyncedLocked(offset)
	return nil
}

// failReset fails the log after a reset that did not complete.
func (l *Log) failReset(err error) error {
	l.failLocked(fmt.Errorf("seglog: reset: %w", err))
	return l.failed
}
