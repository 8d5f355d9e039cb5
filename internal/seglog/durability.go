package seglog

import (
	"fmt"
	"time"
)

// checkpointInterval bounds how often Sync rewrites the recovery-point file.
// The file only shortens the scan after a crash, so it need not follow every
// fsync; keeping it off the acknowledgement path keeps that path at one fsync.
const checkpointInterval = 250 * time.Millisecond

// Group commit.
//
// Appends write under mu and return; a durable append then waits until
// synced covers its last offset. There is no flusher goroutine: whichever
// waiter finds no fsync in flight becomes the leader. It records the current
// end offset as its target, releases mu, fsyncs the active segment (which
// holds every unsynced byte, because a roll fsyncs the segment it closes)
// and, back under mu, advances synced to the target and wakes everyone.
// Waiters whose data was written after the leader took its target find
// synced still short and one of them leads the next round, covering all of
// them with one fsync. So N concurrent appenders cost about two fsyncs per
// round instead of N.

// waitDurableLocked returns once every offset below upTo is durable. The
// caller holds mu (write); it is released while waiting and during fsync.
func (l *Log) waitDurableLocked(upTo int64) error {
	for {
		switch {
		case l.synced >= upTo:
			return nil
		case l.failed != nil:
			return l.failed
		case l.closed:
			return ErrClosed
		case l.syncing:
			l.syncDone.Wait()
		default:
			if err := l.leadSyncLocked(); err != nil {
				return err
			}
		}
	}
}

// leadSyncLocked runs one group-commit round. Caller holds mu. An fsync
// that fails fails the log; a file or directory that cannot be opened (out
// of descriptors, say) only fails this round, whose error it returns.
func (l *Log) leadSyncLocked() (transient error) {
	l.syncing = true
	l.syncRounds++
	target := l.end
	active := l.activeLocked()
	// Index entries are written to their files here, in one small write each,
	// rather than on every append; the files are only needed by Open and are
	// rebuilt for the active segment after a crash anyway.
	indexErr := active.flushIndex()
	f, transient := active.file.pin()
	generation := active.file.generation()
	syncDirToo := l.dirUnsynced
	l.mu.Unlock()

	var err error // from fsync itself
	if transient == nil {
		// Not active.file.datasync: the generation must be read under mu,
		// where the writes it covers were counted.
		err = active.file.datasyncUpTo(f, generation)
		active.file.unpin()
	}
	if err == nil && transient == nil && syncDirToo {
		// The directory is fsynced again next round if this fails.
		transient = syncDir(l.dir)
	}

	l.mu.Lock()
	l.syncing = false
	if err == nil && transient == nil && syncDirToo {
		l.dirUnsynced = false
	}
	switch {
	case transient != nil:
		transient = fmt.Errorf("seglog: sync %s: %w", active.logPath, transient)
	case err != nil:
		// After a failed fsync the kernel may have dropped the dirty pages;
		// retrying could report success for lost data. Fail the log.
		l.failLocked(fmt.Errorf("seglog: fsync %s: %w", active.logPath, err))
	default:
		l.markSyncedLocked(target)
	}
	if indexErr != nil {
		// The data is safe; the entries stay pending and are retried at the
		// next flush (a crash rebuilds the active segment's index anyway).
		l.logger.Warn("writing index entries failed", "file", active.logPath, "err", indexErr)
	}
	l.syncDone.Broadcast()
	return transient
}

// markSyncedLocked records that every offset below upTo is durable.
func (l *Log) markSyncedLocked(upTo int64) {
	if upTo > l.synced {
		l.synced = upTo
	}
}

func (l *Log) failLocked(err error) {
	if l.failed == nil {
		l.failed = err
		l.logger.Error("log failed; appends are refused until it is reopened", "err", err)
	}
}

// Sync makes every batch appended so far durable, sharing the fsync with
// concurrent durable appends, and at most every checkpointInterval persists
// the recovery point. The broker's background flusher calls it.
func (l *Log) Sync() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	err := l.waitDurableLocked(l.end)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return l.maybeCheckpoint()
}

// maybeCheckpoint writes the recovery point if it advanced and the last
// write is older than checkpointInterval. A concurrent writer makes it a
// no-op rather than a wait.
func (l *Log) maybeCheckpoint() error {
	if !l.checkpointMu.TryLock() {
		return nil
	}
	defer l.checkpointMu.Unlock()
	if time.Since(l.lastCheckpoint) < checkpointInterval {
		return nil
	}
	l.mu.RLock()
	synced, closed := l.synced, l.closed
	l.mu.RUnlock()
	if closed || synced <= l.checkpointed {
		return nil
	}
	if err := writeOffsetFile(l.dir, recoveryPointFile, synced, false); err != nil {
		return err
	}
	l.checkpointed = synced
	l.lastCheckpoint = time.Now()
	return nil
}

// WaitDurable returns once every offset below upTo is durable, sharing the
// fsync with concurrent waiters (group commit). Unlike Sync it never
// writes the recovery point, so it keeps the acknowledgement path at one
// fsync; callers append without Durable and wait here when they are ready
// to, which lets a pipelined client's next append go in while this one
// waits.
func (l *Log) WaitDurable(upTo int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.waitDurableLocked(upTo)
}
