package seglog

import (
	"fmt"
	"io"
)

// TruncateTo removes every batch at or after offset, as a follower drops
// the part of its log that diverged from its leader's. offset must lie in
// [StartOffset, EndOffset] (else ErrOffsetOutOfRange) and not inside a
// batch (else ErrOffsetMismatch); at EndOffset there is nothing to cut.
// The epoch index loses its entries from offset on, and durability waits
// for cut offsets fail with ErrTruncated (see WaitDurable).
//
// The cut is durable when TruncateTo returns, and a crash partway leaves
// either the old log or a prefix of it that still holds everything below
// offset: the recovery point is lowered to offset first (so the batches
// after it are verified again at the next Open), then the later segments
// are unlinked and the directory fsynced, then the segment holding offset
// is cut, fsynced and closed, and a new active segment starts at offset.
// Appends go to that new file, never over the cut bytes, so a reader still
// holding a Slice of them reads short (an error), not other batches. A
// replicated log only cuts above its high watermark, where no reader
// looks. It waits for a compaction pass in progress.
func (l *Log) TruncateTo(offset int64) error {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	l.checkpointMu.Lock() // before mu, as in Close; keeps maybeCheckpoint from raising the recovery point meanwhile
	defer l.checkpointMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.committing {
		// A round in flight would mark its target, past the cut, durable.
		l.syncDone.Wait()
	}
	if err := l.writableLocked(); err != nil {
		return err
	}
	if offset < l.start || offset > l.end {
		return fmt.Errorf("%w: cannot truncate to %d, the log holds [%d, %d)", ErrOffsetOutOfRange, offset, l.start, l.end)
	}
	if offset == l.end {
		return nil
	}
	i := l.segmentIndexLocked(offset)
	seg := l.segments[i]
	pos, err := l.cutPositionLocked(seg, offset)
	if err != nil {
		return err
	}

	if l.checkpointed > offset {
		if err := writeOffsetFile(l.dir, recoveryPointFile, offset, true); err != nil {
			return fmt.Errorf("seglog: truncate: %w", err)
		}
		l.checkpointed = offset
	}
	if l.epochs.truncateTo(offset) {
		if err := l.writeEpochsLocked(); err != nil {
			return fmt.Errorf("seglog: truncate: %w", err)
		}
	}
	// From here on the offsets above offset are gone for every waiter,
	// even if the cut fails halfway: their batches are no longer part of
	// what the log vouches for.
	l.cuts = append(l.cuts, offset)
	l.end = offset
	l.synced = min(l.synced, offset)
	l.wanted = min(l.wanted, offset)
	l.syncDone.Broadcast()
	if l.cleanerOffset > offset {
		l.cleanerOffset = offset // the checkpoint may stay higher on disk: Open resets one past the end
	}

	later := l.segments[i+1:]
	l.segments = l.segments[:i+1]
	if err := discardSegments(later); err != nil {
		return l.failTruncate(err)
	}
	if len(later) > 0 {
		if err := syncDir(l.dir); err != nil {
			return l.failTruncate(err)
		}
	}
	switch pos {
	case seg.size:
		// seg, a closed segment, ends below offset already.
	case 0:
		// Nothing of seg stays: drop it (a reader keeps the unlinked
		// file).
		l.segments = l.segments[:i]
		if err := discardSegments([]*segment{seg}); err != nil {
			return l.failTruncate(err)
		}
	default:
		if err := l.cutSegmentLocked(seg, pos); err != nil {
			return l.failTruncate(err)
		}
		if err := l.rollLocked(); err != nil { // trims seg to pos, fsyncs it, starts the next at offset
			return l.failTruncate(err)
		}
		return nil
	}
	if err := l.addSegmentLocked(); err != nil {
		return l.failTruncate(err)
	}
	l.markSyncedLocked(offset) // every segment before the new one is closed, so fsynced
	return nil
}

// failTruncate fails the log after a cut that did not complete: the files
// and the log's idea of them may disagree until it is reopened, which
// finds either the old log or a prefix of it (see TruncateTo).
func (l *Log) failTruncate(err error) error {
	l.failLocked(fmt.Errorf("seglog: truncate: %w", err))
	return l.failed
}

// cutPositionLocked returns where in seg the batches from offset on start:
// the position of the first batch at or after offset, or seg's size if
// there is none. An offset inside a batch is ErrOffsetMismatch.
func (l *Log) cutPositionLocked(seg *segment, offset int64) (int64, error) {
	f, err := seg.file.pin()
	if err != nil {
		return 0, err
	}
	defer seg.file.unpin()
	r := newHeadReader(f, seg.size)
	pos, h, err := r.batchContaining(posForOffset(seg.idx.offsets, uint32(offset-seg.base)), offset)
	switch {
	case err == io.EOF:
		return seg.size, nil
	case err != nil:
		return 0, err
	case h.baseOffset < offset:
		return 0, fmt.Errorf("%w: offset %d lies inside the batch [%d, %d]", ErrOffsetMismatch, offset, h.baseOffset, h.lastOffset)
	}
	return pos, nil
}

// cutSegmentLocked makes seg end at pos: its index is rebuilt from the
// batches that stay, and the file is cut when rollLocked trims it (the
// bytes past size count as preallocated space).
func (l *Log) cutSegmentLocked(seg *segment, pos int64) error {
	f, err := seg.file.pin()
	if err != nil {
		return err
	}
	defer seg.file.unpin()
	seg.size = pos
	seg.forgetTail()
	seg.idx = newSegIndex()
	gaps := l.cfg.Compact || l.cleanerOffset > 0
	if err := l.walkTail(seg, f, gaps); err != nil {
		return err
	}
	return seg.rewriteIndex()
}

// Truncations is how many times TruncateTo has cut the log since it was
// opened (see WaitDurable).
func (l *Log) Truncations() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.cuts)
}

// cutBelow reports whether a TruncateTo after the first truncations cut
// the log below upTo. Caller holds mu.
func (l *Log) cutBelow(truncations int, upTo int64) bool {
	for _, c := range l.cuts[min(truncations, len(l.cuts)):] {
		if c < upTo {
			return true
		}
	}
	return false
}
