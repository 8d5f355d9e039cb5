package seglog

import (
	"context"
	"fmt"
	"os"
	"time"
)

// checkpointInterval bounds how often Sync rewrites the recovery-point file.
// The file only shortens the scan after a crash, so it need not follow every
// fsync; keeping it off the acknowledgement path keeps that path at one fsync.
const checkpointInterval = 250 * time.Millisecond

// Group commit: the commit pipeline.
//
// Appends write under mu and return; a durable append then waits until
// synced covers its last offset. Making data durable is a commit round: it
// takes the end offset as its target, releases mu, fdatasyncs the active
// segment (which holds every byte not yet durable, because a roll fsyncs
// the segment it closes) and the directories whose entries are not yet
// durable, and, back under mu, advances synced to the target and wakes the
// waiters. Exactly one round is in flight at a time (committing).
//
// A waiter that finds no round in flight runs one itself, so a lone
// writer's fsync costs no hand-off to another goroutine. When that round
// ends and waiters want offsets it did not cover (appended while its fsync
// ran), the next round starts at once, covering everything appended by
// then, in commitLoop, a goroutine of the log's that runs rounds back to
// back while anyone waits and then ends; the disk never waits for a woken
// waiter to be scheduled. So a durable append waits for at most the round
// in flight when it was written and the one after it, and N concurrent
// appenders share one fsync per round instead of paying N.

// waitDurableLocked returns once every offset below upTo is durable; with
// ErrTruncated once a TruncateTo after the first truncations ones cut below
// upTo (the offsets waited for are gone, whatever was written there
// since), and with ctx's error once ctx is done. The caller holds mu
// (write); it is released while waiting and during fsync.
func (l *Log) waitDurableLocked(ctx context.Context, upTo int64, truncations int) error {
	if ctx.Done() != nil {
		// Wake the waiter below when ctx ends; Broadcast needs mu.
		stop := context.AfterFunc(ctx, func() {
			l.mu.Lock()
			l.syncDone.Broadcast()
			l.mu.Unlock()
		})
		defer stop()
	}
	for {
		switch {
		case l.cutBelow(truncations, upTo):
			return fmt.Errorf("%w: offsets below %d were cut before they were durable", ErrTruncated, upTo)
		case l.synced >= upTo:
			return nil
		case l.failed != nil:
			return l.failed
		case l.closed:
			return ErrClosed
		case upTo > l.end:
			return fmt.Errorf("%w: offsets up to %d, the log ends at %d", ErrTruncated, upTo, l.end)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		l.wanted = max(l.wanted, upTo)
		if l.committing {
			l.syncDone.Wait()
			continue
		}
		l.committing = true
		err := l.roundLocked()
		if err == nil && l.moreWantedLocked() {
			go l.commitLoop() // takes over committing
		} else {
			l.committing = false
		}
		l.syncDone.Broadcast()
		if err != nil {
			return err
		}
	}
}

// commitLoop runs commit rounds back to back while waiters want offsets
// no round has covered, then ends. It stops once the log is closed or
// failed (Close waits for it, see shutdown), and after a round that could
// not run: the waiters then find no round in flight and run the next one
// themselves, so that one of them gets the error if it persists.
func (l *Log) commitLoop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.moreWantedLocked() {
		if err := l.roundLocked(); err != nil {
			break
		}
		l.syncDone.Broadcast()
	}
	l.committing = false
	l.syncDone.Broadcast()
}

// moreWantedLocked reports whether a waiter wants an offset no round has
// made durable yet, and a round may run.
func (l *Log) moreWantedLocked() bool {
	return l.wanted > l.synced && l.failed == nil && !l.closed
}

// roundLocked runs one commit round. Caller holds mu and has set
// committing. An fsync that fails fails the log; anything else (a file or
// directory that cannot be opened, out of descriptors say) fails only this
// round, whose error it returns.
func (l *Log) roundLocked() error {
	l.syncRounds++
	target := l.end
	active := l.activeLocked()
	dirs := l.unsyncedDirs
	f, err := active.file.pin()
	if err != nil {
		return fmt.Errorf("seglog: sync %s: %w", active.logPath, err)
	}
	// Read under mu, where the writes were counted: exactly what the
	// round covers (target).
	generation, dataEnd := active.file.writeState()
	l.mu.Unlock()

	started := time.Now()
	err = active.file.syncUpTo(f, generation, dataEnd)
	active.file.unpin()
	if err == nil {
		err = syncDirs(dirs)
	}
	busy := time.Since(started)

	l.mu.Lock()
	l.syncBusy += busy
	switch {
	case isFsyncFailure(err):
		l.failLocked(fmt.Errorf("seglog: %w", err))
		return l.failed
	case err != nil:
		return fmt.Errorf("seglog: sync %s: %w", active.logPath, err)
	case l.failed != nil:
		// Something else failed the log meanwhile: acknowledge nothing more.
		return l.failed
	}
	if len(dirs) > 0 {
		l.unsyncedDirs = nil
	}
	observeCommit(busy, max(target-l.synced, 0))
	l.markSyncedLocked(target)
	active.durableEnd = max(active.durableEnd, dataEnd)
	return nil
}

// dropCacheStep is the least DropCached drops from the page cache: syncs
// of a few pages each share one posix_fadvise.
const dropCacheStep = 1 << 20

// DropCacheBehind sets how much of the log's tail the page cache keeps
// once durable: with keep > 0, DropCached asks the kernel to drop the
// pages of the active segment that commit rounds made durable and that lie
// more than keep bytes behind the last of them; 0 (the default) leaves the
// page cache alone. For a log nobody reads while it is written: a Raft
// follower's, whose readers are on its leader. Its pages would otherwise
// stay cached until memory runs short, pushing out the pages the node's
// readers do use, and every new page would have to be reclaimed from them
// first; dropped, they are free for the next write at once. What a reader
// asks for later comes from the disk. A segment closed by a roll keeps the
// pages not dropped by then (about keep bytes).
func (l *Log) DropCacheBehind(keep int64) { l.cacheKeep.Store(max(keep, 0)) }

// CacheKeep is what DropCacheBehind last set (0: the cache is left alone).
func (l *Log) CacheKeep() int64 { return l.cacheKeep.Load() }

// DropCached drops the pages DropCacheBehind lets go now. Dropping takes
// the kernel a while (freeing every page), so it is not part of a sync:
// the caller runs it after a sync, off its acknowledgement path. A
// concurrent call makes it a no-op rather than a wait.
func (l *Log) DropCached() {
	keep := l.cacheKeep.Load()
	if keep == 0 || !l.dropMu.TryLock() {
		return
	}
	defer l.dropMu.Unlock()
	l.mu.RLock()
	if l.closed || len(l.segments) == 0 {
		l.mu.RUnlock()
		return
	}
	seg := l.activeLocked()
	to := seg.durableEnd - keep
	seg.acquire() // stays open though a roll or a retention pass drops it meanwhile
	l.mu.RUnlock()
	defer seg.release()

	to -= to % int64(os.Getpagesize()) // the kernel keeps a page the range ends inside
	if to-seg.uncachedTo < dropCacheStep {
		return
	}
	f, err := seg.file.pin()
	if err != nil {
		return
	}
	defer seg.file.unpin()
	// Only advice: pages the kernel keeps cost memory, not correctness,
	// so a failure is not worth an error (nor a log line per sync).
	if dropPages(f, seg.uncachedTo, to-seg.uncachedTo) == nil {
		seg.uncachedTo = to
	}
}

// syncAllLocked makes everything durable, for Close: it trims the active
// segment's preallocated space, fsyncs its data and index files, and the
// directories still waiting for an fsync. Caller holds mu; no round is in
// flight.
func (l *Log) syncAllLocked() error {
	active := l.activeLocked()
	if err := active.trimPreallocation(); err != nil {
		return err
	}
	if err := active.syncAll(); err != nil {
		return err
	}
	if err := syncDirs(l.unsyncedDirs); err != nil {
		return err
	}
	l.unsyncedDirs = nil
	return nil
}

// markSyncedLocked records that every offset below upTo is durable.
func (l *Log) markSyncedLocked(upTo int64) {
	if upTo > l.synced {
		l.synced = upTo
	}
}

// failLocked fails the log: from now on appends, syncs and durable waits
// return err, until the log is reopened (Kafka's offline log directory,
// PostgreSQL's panic on a failed fsync). Nothing appended before and not
// yet durable is ever acknowledged as durable.
func (l *Log) failLocked(err error) {
	if l.failed == nil {
		l.failed = err
		l.logger.Error("log failed; appends are refused until it is reopened", "err", err)
	}
}

// Sync makes every batch appended so far durable, sharing the fsync with
// concurrent durable appends, and at most every checkpointInterval persists
// the recovery point. The broker's background flusher and the queue stores
// call it. Its error says only whether the data is durable: a recovery
// point that cannot be written (out of descriptors, say) is logged, not
// returned, because callers acknowledge on a nil error and the data is on
// disk either way; the checkpoint only shortens the scan after a crash,
// and the next Sync tries it again.
func (l *Log) Sync() error {
	if err := l.SyncData(); err != nil {
		return err
	}
	l.Checkpoint(checkpointInterval)
	return nil
}

// SyncData is Sync without the recovery point: for a caller that
// acknowledges once it returns and writes the recovery point after
// (Checkpoint), so that its acknowledgements wait for one fsync.
func (l *Log) SyncData() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.waitDurableLocked(context.Background(), l.end, len(l.cuts))
}

// Checkpoint writes the recovery point, what the last sync made durable,
// if it advanced and was last written at least every ago; a concurrent
// writer makes it a no-op rather than a wait. A failure is logged, not
// returned: the data is on disk either way, the recovery point only
// shortens the scan after a crash, and the next Checkpoint tries again.
func (l *Log) Checkpoint(every time.Duration) {
	if err := l.maybeCheckpoint(every); err != nil {
		l.logger.Warn("writing the recovery point failed; recovery after a crash will scan further back", "err", err)
	}
}

// maybeCheckpoint is Checkpoint, returning its error.
func (l *Log) maybeCheckpoint(every time.Duration) error {
	if !l.checkpointMu.TryLock() {
		return nil
	}
	defer l.checkpointMu.Unlock()
	if time.Since(l.lastCheckpoint) < every {
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
// waits. truncations is Truncations (or AppendResult.Truncations) as of
// when the data was appended: should a TruncateTo since have cut below
// upTo, the wait fails with ErrTruncated rather than vouch for whatever
// was written at those offsets after the cut. It returns ctx's error once
// ctx is done (a waiter already running an fsync finishes it first).
func (l *Log) WaitDurable(ctx context.Context, upTo int64, truncations int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.waitDurableLocked(ctx, upTo, truncations)
}
