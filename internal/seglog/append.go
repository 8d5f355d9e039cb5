package seglog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// AppendOptions say how Append stamps and acknowledges a write.
type AppendOptions struct {
	// LogAppendTime > 0 stamps every batch with this time in milliseconds
	// (message.timestamp.type=LogAppendTime).
	LogAppendTime int64
	// LeaderEpoch is stamped into every batch's PartitionLeaderEpoch: the
	// epoch of the leader that assigned the offsets (0 on a single node).
	// An epoch above the log's latest starts a new entry of the epoch
	// index (epochs.go); one below it is ErrEpochRegressed.
	LeaderEpoch int32
	// Durable makes Append return only after an fsync that covers the data
	// (acks=all).
	Durable bool
}

// AppendResult is where the appended batches landed.
type AppendResult struct {
	BaseOffset    int64 // offset of the first record
	LastOffset    int64 // offset of the last record
	LogAppendTime int64 // the stamped time, -1 when batches keep their create time
	// Truncations is how many TruncateTo calls came before the append:
	// what WaitDurable takes to tell the batches from any written at
	// their offsets after a cut.
	Truncations int
}

// errEmptyAppend is returned for an Append with no bytes.
var errEmptyAppend = errors.New("seglog: nothing to append")

// ErrOffsetMismatch is an AppendAt whose batches do not start at the log
// end offset, or skip or repeat offsets.
var ErrOffsetMismatch = errors.New("seglog: batches do not continue the log")

// appendBatch is one batch of an Append payload.
type appendBatch struct {
	pos  int64  // position in the payload (its parts back to back)
	raw  []byte // the batch, in the part of the payload holding it
	head batchHead
}

// Append writes records, one or more v2 record batches back to back that the
// caller has already validated (a produce request's partition payload).
//
// It assigns offsets consecutively by rewriting each batch's base offset in
// place (record.SetBaseOffset; with opt.LogAppendTime also the timestamp and
// CRC), stamps opt.LeaderEpoch, and writes the whole payload with one
// write(2). With opt.Durable it waits for an fsync covering the data,
// shared with concurrent durable appenders (group commit, see
// durability.go).
func (l *Log) Append(records []byte, opt AppendOptions) (AppendResult, error) {
	batches, err := splitBatches(records)
	if err != nil {
		return AppendResult{}, err
	}
	res := AppendResult{LogAppendTime: -1}
	if opt.LogAppendTime > 0 {
		// Recomputing CRCs needs no lock.
		for i := range batches {
			b := &batches[i]
			record.SetLogAppendTime(b.raw, opt.LogAppendTime)
			b.head.maxTimestamp = opt.LogAppendTime
		}
		res.LogAppendTime = opt.LogAppendTime
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return AppendResult{}, err
	}
	if err := l.appendLocked([][]byte{records}, batches, opt.LeaderEpoch); err != nil {
		return AppendResult{}, err
	}
	res.BaseOffset, res.LastOffset, res.Truncations = batches[0].head.baseOffset, l.end-1, len(l.cuts)
	if opt.Durable {
		if err := l.waitDurableLocked(context.Background(), l.end, len(l.cuts)); err != nil {
			return AppendResult{}, err
		}
	}
	return res, nil
}

// AppendAt writes batches that already carry their offsets, as a follower
// copies its leader's log: the first must start at the log end offset and
// each continue the one before. Every batch is verified (record.Verify:
// CRC-32C and structure) and stamped with epoch, the epoch its leader wrote
// it under; an epoch below the log's latest is ErrEpochRegressed. Offsets
// that do not continue the log are ErrOffsetMismatch. Like Append it does
// not wait for an fsync.
func (l *Log) AppendAt(records []byte, epoch int32) (AppendResult, error) {
	return l.appendAt([][]byte{records}, epoch, true)
}

// AppendAtVerified is AppendAt for batches the caller has verified
// already (a Raft replica's: its leader's callers validated them, its
// followers checked them as they arrived): their CRCs are not computed
// again. The batches may lie in several parts, each holding whole batches,
// which are written in order with one pwritev rather than copied together
// first (a leader's entries are separate copies of what it was proposed).
func (l *Log) AppendAtVerified(epoch int32, parts ...[]byte) (AppendResult, error) {
	return l.appendAt(parts, epoch, false)
}

func (l *Log) appendAt(parts [][]byte, epoch int32, verify bool) (AppendResult, error) {
	if len(parts) == 0 {
		return AppendResult{}, errEmptyAppend
	}
	var batches []appendBatch
	var size int64
	for _, p := range parts {
		bs, err := splitBatches(p)
		if err != nil {
			return AppendResult{}, err
		}
		for i := range bs {
			bs[i].pos += size
		}
		batches = append(batches, bs...)
		size += int64(len(p))
	}
	for i, b := range batches {
		if verify {
			if _, err := record.Verify(b.raw); err != nil {
				return AppendResult{}, fmt.Errorf("seglog: batch at byte %d of the append: %w", b.pos, err)
			}
		}
		if i > 0 && b.head.baseOffset != batches[i-1].head.lastOffset+1 {
			return AppendResult{}, fmt.Errorf("%w: batch at offset %d follows one ending at %d",
				ErrOffsetMismatch, b.head.baseOffset, batches[i-1].head.lastOffset)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return AppendResult{}, err
	}
	if first := batches[0].head.baseOffset; first != l.end {
		return AppendResult{}, fmt.Errorf("%w: first batch at offset %d, the log ends at %d", ErrOffsetMismatch, first, l.end)
	}
	if err := l.appendLocked(parts, batches, epoch); err != nil {
		return AppendResult{}, err
	}
	return AppendResult{BaseOffset: batches[0].head.baseOffset, LastOffset: l.end - 1, LogAppendTime: -1, Truncations: len(l.cuts)}, nil
}

// writableLocked returns why the log takes no appends, if it does not.
func (l *Log) writableLocked() error {
	switch {
	case l.closed:
		return ErrClosed
	case l.failed != nil:
		return l.failed
	case l.corrupt != nil:
		return l.corrupt
	}
	return nil
}

// appendLocked gives the batches, which lie in parts (back to back),
// consecutive offsets from the log end on and the leader epoch, and writes
// the parts with one write(2) (pwritev for several). Caller holds mu and
// checked writableLocked.
func (l *Log) appendLocked(parts [][]byte, batches []appendBatch, epoch int32) error {
	var count, size int64
	for _, b := range batches {
		count += b.head.lastOffset - b.head.baseOffset + 1
	}
	for _, p := range parts {
		size += int64(len(p))
	}
	if err := l.stampEpochLocked(epoch); err != nil {
		return err
	}
	if err := l.maybeRollLocked(size, count); err != nil {
		return err
	}
	seg := l.activeLocked()

	next := l.end
	for i := range batches {
		b := &batches[i]
		// Only what differs is written: a batch stamped already (a Raft
		// replica's entry) may be read meanwhile by others holding it.
		raw := b.raw
		if b.head.baseOffset != next {
			record.SetBaseOffset(raw, next)
		}
		if b.head.epoch != epoch {
			record.SetPartitionLeaderEpoch(raw, epoch)
		}
		b.head.lastOffset += next - b.head.baseOffset
		b.head.baseOffset = next
		b.head.epoch = epoch
		next = b.head.lastOffset + 1
	}
	if err := l.writeLocked(seg, parts, size); err != nil {
		return err
	}
	interval := int64(l.cfg.IndexIntervalBytes)
	for _, b := range batches {
		seg.idx.add(seg.base, seg.size+b.pos, b.head, interval)
	}
	if seg.size == 0 {
		seg.rollTime = time.Now()
	}
	seg.size += size
	seg.next = next
	l.end = next
	return nil
}

// splitBatches walks the payload with record.ParseHeader. The broker has
// already run full validation; this only finds the batch boundaries.
func splitBatches(records []byte) ([]appendBatch, error) {
	if len(records) == 0 {
		return nil, errEmptyAppend
	}
	var batches []appendBatch
	for pos := 0; pos < len(records); {
		h, err := record.ParseHeader(records[pos:])
		if err != nil {
			return nil, fmt.Errorf("seglog: batch at byte %d of the append: %w", pos, err)
		}
		batches = append(batches, appendBatch{pos: int64(pos), raw: records[pos : pos+h.Size()], head: headOf(h)})
		pos += h.Size()
	}
	return batches, nil
}

// writeLocked writes the payload's parts (size bytes together) back to
// back at the segment's write position, first
// preallocating the file ahead of it when the write would pass the space
// already allocated (segment.preallocate). A failed write is cut off again
// so the file never holds a partial batch; if even that fails the log is
// failed.
func (l *Log) writeLocked(seg *segment, parts [][]byte, size int64) error {
	f, err := seg.file.pin()
	if err != nil {
		return err
	}
	defer seg.file.unpin()
	end := seg.size + size
	direct := l.direct.Load()
	if !direct {
		// The write moves the size past the tail kept. An O_DIRECT
		// descriptor stays open, should the log write direct again,
		// until the roll or the file cache closes it.
		seg.forgetTail()
	}
	// A direct write ends at a block boundary (direct.go): zeros up to it
	// must land in space allocated already.
	if written := alignUp(end); end > seg.allocated || direct && written > seg.allocated {
		seg.preallocate(f, max(preallocationEnd(end, l.cfg.SegmentBytes), written))
	}
	wrote := false
	if direct {
		wrote, err = seg.writeDirectLocked(f, parts)
		if !wrote {
			l.warnDirectRefusedLocked(seg)
		}
	}
	switch {
	case wrote:
	case len(parts) == 1:
		_, err = f.WriteAt(parts[0], seg.size)
	default:
		err = writeParts(f, parts, seg.size)
	}
	if err == nil {
		seg.file.wrote(end)
		return nil
	}
	err = fmt.Errorf("seglog: write %s: %w", seg.logPath, err)
	// Truncate whatever the byte count says: os.File.WriteAt reports 0
	// when a short pwrite is followed by ENOSPC, though bytes did reach
	// the file. This drops the preallocated space too.
	terr := f.Truncate(seg.size)
	seg.file.wrote(seg.size)
	seg.allocated = seg.size
	if terr != nil {
		l.failLocked(fmt.Errorf("%w; removing the partial write failed: %v", err, terr))
	}
	return err
}

// maybeRollLocked starts a new segment when the active one would exceed
// segment.bytes, is older than segment.ms (see Config.rollMs), or could not
// index the new offsets in 32 bits.
func (l *Log) maybeRollLocked(size, count int64) error {
	active := l.activeLocked()
	if active.size == 0 {
		return nil
	}
	full := active.size+size > l.cfg.SegmentBytes
	old := time.Since(active.rollTime) >= time.Duration(l.cfg.rollMs())*time.Millisecond
	offsetsOverflow := l.end+count-1-active.base > math.MaxUint32
	if !full && !old && !offsetsOverflow {
		return nil
	}
	return l.rollLocked()
}

// rollLocked closes the active segment and starts a new one at the end
// offset. The closed segment is trimmed to its data and fsynced with its
// indexes first, and the directory after the new file is created: so a
// torn write can only ever be in the last segment, a closed segment holds
// nothing but whole batches, and its index files can be trusted after a
// crash. The fsyncs run under mu, stalling appends once per segment.
func (l *Log) rollLocked() error {
	old := l.activeLocked()
	old.endDirect()
	if err := old.trimPreallocation(); err != nil {
		return fmt.Errorf("seglog: roll: trim %s: %w", old.logPath, err)
	}
	if err := old.syncAll(); err != nil {
		if isFsyncFailure(err) {
			l.failLocked(fmt.Errorf("seglog: roll: %w", err))
			return l.failed
		}
		// Writing the index entries (out of space, say) or opening a file
		// failed: nothing was lost, the next append tries the roll again.
		return fmt.Errorf("seglog: roll: %w", err)
	}
	if err := l.addSegmentLocked(); err != nil {
		return err
	}
	l.markSyncedLocked(old.next)
	l.syncDone.Broadcast()
	return nil
}

// addSegmentLocked creates a new active segment at the end offset and
// makes its name durable (and those of a new log's directories), after the
// previous active segment was closed.
func (l *Log) addSegmentLocked() error {
	seg, err := createSegment(l.dir, l.end)
	if err != nil {
		return fmt.Errorf("seglog: roll: %w", err)
	}
	dirs := l.unsyncedDirs // the log's own directory first, if any
	if len(dirs) == 0 {
		dirs = []string{l.dir}
	}
	if err := syncDirs(dirs); err != nil {
		seg.removeFiles()
		seg.release()
		if isFsyncFailure(err) {
			l.failLocked(fmt.Errorf("seglog: roll: %w", err))
			return l.failed
		}
		return fmt.Errorf("seglog: roll: %w", err)
	}
	l.unsyncedDirs = nil
	l.segments = append(l.segments, seg)
	return nil
}
