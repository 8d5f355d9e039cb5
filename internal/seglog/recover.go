package seglog

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// load builds the in-memory state from the directory (see Open), which
// Open found missing along with the ancestors in created.
func (l *Log) load(created []string) error {
	if err := l.recoverCleanerFiles(); err != nil {
		return err
	}
	bases, err := listSegmentBases(l.dir)
	if err != nil {
		return err
	}
	storedStart, haveStart, err := readOffsetFile(l.dir, startOffsetFile)
	if err != nil {
		l.logger.Warn("ignoring unreadable log start offset", "err", err)
		haveStart = false
	}
	if l.cleanerOffset, _, err = readOffsetFile(l.dir, cleanerOffsetFile); err != nil {
		l.logger.Warn("ignoring unreadable cleaner checkpoint; the next compaction covers the whole log", "err", err)
		l.cleanerOffset = 0
	}
	recoveryPoint, haveRecoveryPoint, err := readOffsetFile(l.dir, recoveryPointFile)
	if err != nil {
		l.logger.Warn("ignoring unreadable recovery point; verifying the whole log", "err", err)
		haveRecoveryPoint = false
	}
	if !haveRecoveryPoint {
		recoveryPoint = 0
	}
	clean, err := fileExists(l.path(cleanShutdownFile))
	if err != nil {
		return err
	}
	l.epochs, err = readEpochFile(l.dir)
	rebuildEpochs := err != nil
	if rebuildEpochs {
		l.logger.Warn("rebuilding an unreadable leader epoch index from the batches", "err", err)
	}
	storedEpochs := slices.Clone(l.epochs.entries)

	for _, base := range bases {
		s, err := openSegment(l.dir, base)
		if err != nil {
			return err
		}
		l.segments = append(l.segments, s)
	}
	if len(l.segments) == 0 {
		s, err := createSegment(l.dir, max(storedStart, 0))
		if err != nil {
			return err
		}
		l.segments = append(l.segments, s)
		// A new log: the names leading to it are not durable yet. The
		// first commit round or roll fsyncs them, so a new log costs no
		// fsync until it holds durable data. (A log that already held
		// acknowledged data had its names fsynced by the process that
		// acknowledged it.)
		l.unsyncedDirs = dirsToSync(l.dir, created)
	}
	if err := l.dropEmptySegments(); err != nil {
		return err
	}
	if haveStart {
		// Segments wholly below the persisted start offset were being
		// deleted when the process stopped: finish that rather than verify
		// data nobody can read.
		if err := l.dropSegmentsBefore(storedStart); err != nil {
			return err
		}
	}

	// Segments before firstToVerify are trusted; the rest are verified.
	firstToVerify := len(l.segments)
	if !clean {
		firstToVerify = l.segmentIndexLocked(recoveryPoint)
	}
	// Only a log that is or was compacted may skip offsets, and only in
	// a closed segment: anywhere else a gap is data that went missing.
	compacted := l.cfg.Compact || l.cleanerOffset > 0
	for i, s := range l.segments {
		gaps := compacted && i < len(l.segments)-1
		if i < firstToVerify {
			err = l.loadTrusted(s, gaps)
		} else {
			err = l.verifySegment(s, l.isTail(i), recoveryPoint, gaps)
		}
		if err != nil {
			return err
		}
	}
	if err := l.dropStrayEmptyTail(); err != nil {
		return err
	}
	if err := l.checkContiguous(compacted); err != nil {
		return err
	}
	if rebuildEpochs {
		if err := l.rebuildEpochs(); err != nil {
			return err
		}
	}

	active := l.activeLocked()
	l.end = active.next
	if l.end < recoveryPoint { // also after a clean Close: a file cut short since
		return &CorruptionError{File: active.logPath, Pos: active.size,
			Err: fmt.Errorf("log ends at offset %d, below the recovery point %d: fsynced data is missing", l.end, recoveryPoint)}
	}
	l.start = l.segments[0].base
	if haveStart && storedStart > l.start {
		l.start = storedStart
	}
	if l.start > l.end {
		l.logger.Warn("log start offset beyond the end of the log; using the end", "start", l.start, "end", l.end)
		l.start = l.end
	}
	if err := l.dropSegmentsBelowStartLocked(); err != nil {
		return err
	}
	if err := l.settleEpochs(storedEpochs, rebuildEpochs); err != nil {
		return err
	}
	if l.cleanerOffset > l.end {
		l.logger.Warn("cleaner checkpoint beyond the end of the log; compacting from the start", "checkpoint", l.cleanerOffset, "end", l.end)
		l.cleanerOffset = 0
	}
	l.synced = l.end
	l.lastCheckpoint = time.Now()
	active.rollTime = firstBatchTime(active)

	if clean {
		l.checkpointed = l.end
		// Remove the marker durably before anything new is written: a marker
		// that reappeared after a crash would make the next Open trust a
		// torn tail.
		if err := os.Remove(l.path(cleanShutdownFile)); err != nil {
			return err
		}
		return syncDir(l.dir)
	}
	// Every verified segment was fsynced by verifySegment, so the recovery
	// point may move to the end; the next Sync (the broker's flusher) writes
	// it, keeping that fsync off the start-up path. A crash before then
	// only verifies the same batches again.
	l.checkpointed = recoveryPoint
	return nil
}

// isTail reports whether segment i is where a torn write can be: the last
// segment, or the one before an empty last segment (a roll that created the
// new file before the crash).
func (l *Log) isTail(i int) bool {
	n := len(l.segments)
	return i == n-1 || (i == n-2 && l.segments[n-1].size == 0)
}

// dropEmptySegments removes empty segments other than the last one: they
// hold nothing and only confuse the offset bookkeeping.
func (l *Log) dropEmptySegments() error {
	var kept, dropped []*segment
	for i, s := range l.segments {
		if s.size == 0 && i != len(l.segments)-1 {
			l.logger.Info("removing empty leftover segment", "file", s.logPath)
			dropped = append(dropped, s)
			continue
		}
		kept = append(kept, s)
	}
	l.segments = kept
	return discardSegments(dropped)
}

// dropSegmentsBefore removes the segments followed by one whose base is at
// or below offset, i.e. whose data lies wholly below it.
func (l *Log) dropSegmentsBefore(offset int64) error {
	n := 0
	for n+1 < len(l.segments) && l.segments[n+1].base <= offset {
		l.logger.Info("removing segment below the log start offset", "file", l.segments[n].logPath, "start", offset)
		n++
	}
	dropped := l.segments[:n]
	l.segments = l.segments[n:]
	return discardSegments(dropped)
}

// dropStrayEmptyTail removes an empty last segment that does not continue
// the one before it: one whose base lies inside it (left by something other
// than a roll), or beyond it when that one's torn tail was just truncated.
// It holds nothing, and keeping it would leave an overlap, or a gap of
// offsets that were never acknowledged. (A gap is otherwise fine: compaction
// may have removed the end of the segment before; the empty segment's base
// is then the log end offset and must stay.)
func (l *Log) dropStrayEmptyTail() error {
	n := len(l.segments)
	if n < 2 || l.segments[n-1].size != 0 {
		return nil
	}
	prev, last := l.segments[n-2], l.segments[n-1]
	if last.base == prev.next || last.base > prev.next && !prev.truncated {
		return nil
	}
	s := l.segments[n-1]
	l.logger.Info("removing empty segment that does not continue the log", "file", s.logPath)
	l.segments = l.segments[:n-1]
	return discardSegments([]*segment{s})
}

// checkContiguous refuses segments whose offsets overlap, and, in a log
// that was never compacted, segments with offsets missing between them.
func (l *Log) checkContiguous(compacted bool) error {
	for i := 1; i < len(l.segments); i++ {
		prev, s := l.segments[i-1], l.segments[i]
		if prev.next > s.base {
			return &CorruptionError{File: s.logPath, Pos: 0,
				Err: fmt.Errorf("segment starts at offset %d but the previous one runs to %d", s.base, prev.next)}
		}
		if prev.next < s.base && !compacted {
			return &CorruptionError{File: prev.logPath, Pos: prev.size,
				Err: fmt.Errorf("segment ends at offset %d but the next one starts at %d: records are missing from a log that was never compacted", prev.next, s.base)}
		}
	}
	return nil
}

// firstBatchTime is the segment.ms clock of a reopened active segment: the
// first batch's timestamp (as Kafka does), or now if it has none.
func firstBatchTime(s *segment) time.Time {
	now := time.Now()
	if s.size == 0 {
		return time.Time{}
	}
	f, err := s.file.pin()
	if err != nil {
		return now
	}
	h, err := newHeadReader(f, s.size).at(0)
	s.file.unpin()
	if err != nil || h.maxTimestamp <= 0 || h.maxTimestamp > now.UnixMilli() {
		return now
	}
	return time.UnixMilli(h.maxTimestamp)
}

// loadTrusted loads a segment that needs no verification: its index files if
// they are consistent (else it rebuilds them from the batch headers), then
// the headers after the last index entry, to learn the end offset and the
// latest timestamps. A header that does not parse is corruption. With gaps
// (a closed segment, which compaction may have thinned) a batch may start
// beyond the offset after the previous one.
func (l *Log) loadTrusted(s *segment, gaps bool) error {
	f, err := s.file.pin()
	if err != nil {
		return err
	}
	defer s.file.unpin()
	offsets, times, err := readIndexFiles(s)
	if err == nil {
		s.idx = newSegIndex()
		s.idx.offsets, s.idx.times = offsets, times
		s.idx.flushedOffsets, s.idx.flushedTimes = len(offsets), len(times)
		s.idx.maxTs = s.idx.lastTimeTs()
		err = l.walkTail(s, f, gaps)
		if err == nil {
			return s.flushIndex()
		}
		if _, corrupt := err.(*CorruptionError); corrupt {
			return err
		}
	}
	l.logger.Info("rebuilding segment index", "file", s.logPath, "reason", err)
	s.idx = newSegIndex()
	if err := l.walkTail(s, f, gaps); err != nil {
		return err
	}
	if err := s.rewriteIndex(); err != nil {
		return err
	}
	return s.syncAll()
}

// walkTail walks the batch headers from the last index entry (or the start)
// to the end of the file, adding index entries as appends would have.
func (l *Log) walkTail(s *segment, f *os.File, gaps bool) error {
	r := newHeadReader(f, s.size)
	pos, next := int64(0), s.base
	if n := len(s.idx.offsets); n > 0 {
		pos, next = int64(s.idx.offsets[n-1].pos), s.base+int64(s.idx.offsets[n-1].rel)
	}
	indexed := pos > 0
	for pos < s.size {
		h, err := r.at(pos)
		if err != nil {
			return &CorruptionError{File: s.logPath, Pos: pos, Err: err}
		}
		if h.baseOffset != next && !(gaps && !indexed && h.baseOffset > next) {
			if indexed {
				return fmt.Errorf("%w: entry points at offset %d, batch has %d", errBadIndex, next, h.baseOffset)
			}
			return &CorruptionError{File: s.logPath, Pos: pos,
				Err: fmt.Errorf("%w: base offset %d, expected %d", record.ErrCorrupt, h.baseOffset, next)}
		}
		if indexed {
			s.idx.bytesSinceEntry = 0
			s.idx.account(h)
			indexed = false
		} else {
			s.idx.add(s.base, pos, h, int64(l.cfg.IndexIntervalBytes))
		}
		next = h.lastOffset + 1
		pos += h.size
	}
	s.next = next
	return nil
}

// readIndexFiles reads and checks the segment's index files. A missing
// file reads as empty: the entries are then rebuilt from the batches.
func readIndexFiles(s *segment) ([]offsetEntry, []timeEntry, error) {
	stem := strings.TrimSuffix(s.logPath, logSuffix)
	ib, err := readFileIfExists(stem + indexSuffix)
	if err != nil {
		return nil, nil, err
	}
	offsets, err := decodeOffsetIndex(ib, s.size)
	if err != nil {
		return nil, nil, err
	}
	tb, err := readFileIfExists(stem + timeIndexSuffix)
	if err != nil {
		return nil, nil, err
	}
	times, err := decodeTimeIndex(tb, offsets)
	if err != nil {
		return nil, nil, err
	}
	return offsets, times, nil
}

// verifySegment checks every batch of s with record.Verify, rebuilding the
// indexes as it goes, and decides what to do with the first bad batch:
//
//   - in a segment that is not the tail, or holding offsets below the
//     recovery point: *CorruptionError (that data was acknowledged as durable);
//   - in the tail segment with a valid batch somewhere after it and only
//     non-zero bytes between: a flipped bit, not a torn write:
//     *CorruptionError;
//   - otherwise a torn tail: truncate at its position and warn.
//
// Looking for a valid batch after the bad one, rather than trusting the bad
// batch's length field, is what keeps a single flipped bit in a length from
// being mistaken for a torn tail and silently dropping everything after it.
// But a power cut can also leave a valid batch after a bad one: the kernel
// writes a file's dirty pages back in any order, so a later page may reach
// the disk while an earlier one never does, and the earlier one then reads
// as zeros (a new or preallocated block). No fsync completed after that
// page was written (it would have carried the page along), so nothing from
// there on was acknowledged as durable: a whole zero page between the bad
// batch and the valid one (or zeros from the bad batch to the end of its
// page: the page the fsynced data ended in) marks a torn tail, not damage,
// unless one flipped bit explains the bad batch's CRC (lostPageIn). What
// this cannot tell apart: damage of more than one bit to a batch that
// holds a page of zeros as content, in the tail above the recovery point
// (data at most a checkpoint interval old), would be cut as a torn tail.
// On success the segment is fsynced.
func (l *Log) verifySegment(s *segment, tail bool, recoveryPoint int64, gaps bool) error {
	if s.size == 0 {
		// Nothing to verify or fsync; stale index entries must go.
		s.next = s.base
		s.verifiedAtOpen = true
		return s.rewriteIndex()
	}
	f, err := s.file.pin()
	if err != nil {
		return err
	}
	defer s.file.unpin()
	good, next, bad := l.scanVerified(s, f, gaps)
	if bad != nil {
		switch {
		case !tail:
			return &CorruptionError{File: s.logPath, Pos: good, Err: bad}
		case next < recoveryPoint:
			return &CorruptionError{File: s.logPath, Pos: good,
				Err: fmt.Errorf("%w (offset %d is below the recovery point %d)", bad, next, recoveryPoint)}
		}
		dataEnd, err := dataEndAfter(f, good, s.size)
		if err != nil {
			return err
		}
		q, found, err := findValidBatchAfter(f, good, dataEnd, s.size, next)
		if err != nil {
			return err
		}
		if found {
			lost, err := lostPageIn(f, good, q)
			if err != nil {
				return err
			}
			if !lost {
				return &CorruptionError{File: s.logPath, Pos: good,
					Err: fmt.Errorf("%w (a valid batch follows at position %d)", bad, q)}
			}
			l.logger.Warn("a page of the tail never reached the disk before the crash; the tail is cut there, later batches with it (no fsync covered them)",
				"file", s.logPath, "pos", good, "later_batch_at", q)
		}
		if err := f.Truncate(good); err != nil {
			return err
		}
		if dataEnd > good {
			l.logger.Warn("truncated torn tail of log segment", "file", s.logPath, "pos", good,
				"bytes_dropped", s.size-good, "next_offset", next, "reason", bad)
		} else {
			// Preallocated space, or blocks of unsynced writes a crash
			// lost: expected after every unclean stop.
			l.logger.Debug("cut zero-filled tail of log segment", "file", s.logPath, "pos", good,
				"bytes", s.size-good, "next_offset", next)
		}
		s.size, s.allocated = good, good
		s.truncated = true
	}
	s.next = next
	s.verifiedAtOpen = true
	if err := s.rewriteIndex(); err != nil {
		return err
	}
	if tail {
		// The process that wrote the tail may have died before fsyncing
		// it: count its content (and any cut) as written, so the fsync
		// runs. Its index is rebuilt by every recovery, so only its data
		// needs the fsync.
		s.file.wrote(s.size)
		return s.file.sync(f)
	}
	return s.syncAll()
}

// scanVerified reads s sequentially, verifying each batch and rebuilding the
// in-memory index. It returns the length of the valid prefix, the offset
// after it, and why the batch at that position is bad (nil if none is).
// With gaps, batch base offsets need only increase (a compacted segment).
func (l *Log) scanVerified(s *segment, f *os.File, gaps bool) (good, next int64, bad error) {
	s.idx = newSegIndex()
	interval := int64(l.cfg.IndexIntervalBytes)
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, s.size), 1<<20)
	var buf []byte
	pos, next := int64(0), s.base
	for pos < s.size {
		left := s.size - pos
		if left < record.HeaderSize {
			return pos, next, fmt.Errorf("%w: %d trailing bytes, less than a batch header", record.ErrShort, left)
		}
		head, err := br.Peek(record.HeaderSize)
		if err != nil {
			return pos, next, err
		}
		h, err := peekHead(head)
		if err != nil {
			return pos, next, err
		}
		size := h.size
		if size > left {
			return pos, next, fmt.Errorf("%w: batch of %d bytes runs past the end of the file (%d bytes left)", record.ErrShort, size, left)
		}
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := io.ReadFull(br, buf); err != nil {
			return pos, next, err
		}
		verified, err := record.Verify(buf)
		if err != nil {
			return pos, next, err
		}
		if verified.BaseOffset != next && !(gaps && verified.BaseOffset > next) {
			return pos, next, fmt.Errorf("%w: base offset %d, expected %d", record.ErrCorrupt, verified.BaseOffset, next)
		}
		s.idx.add(s.base, pos, headOf(verified), interval)
		l.epochs.assign(verified.PartitionLeaderEpoch, verified.BaseOffset)
		next = verified.LastOffset() + 1
		pos += size
	}
	return pos, next, nil
}

// findValidBatchAfter looks for any position after bad and before
// startsBefore where a batch with an offset >= minOffset passes
// record.Verify within the file's size bytes, reading the file a window at
// a time. Candidates must have a sound header and a length that fits
// before the CRC is computed, so random garbage costs little.
func findValidBatchAfter(f *os.File, bad, startsBefore, size, minOffset int64) (int64, bool, error) {
	const window = 1 << 20
	buf := make([]byte, window+record.HeaderSize)
	for from := bad + 1; from < startsBefore && from+record.HeaderSize <= size; from += window {
		n := min(int64(len(buf)), size-from)
		b := buf[:n]
		if _, err := f.ReadAt(b, from); err != nil && err != io.EOF {
			return 0, false, err
		}
		for i := 0; i < window && i+record.HeaderSize <= len(b); i++ {
			h, err := peekHead(b[i:])
			q := from + int64(i)
			if q >= startsBefore {
				break
			}
			if err != nil || h.baseOffset < minOffset || q+h.size > size {
				continue
			}
			batch, err := readBatch(f, q, h)
			if err != nil {
				return 0, false, err
			}
			if _, err := record.Verify(batch); err == nil {
				return q, true, nil
			}
		}
	}
	return 0, false, nil
}

// pageSize is the unit in which the kernel writes a file's dirty data back.
const pageSize = 4096

// lostPageIn reports whether the bad batch at bad, with a valid one at
// next, is explained by a page that never reached the disk (see
// verifySegment): a whole, page-aligned page of zeros lies between them,
// or the page bad lies in is zeros from bad to its end (zeroPageTail), and
// the bad batch's CRC does not fail the way bit rot makes it fail, by one
// flipped bit (record.OneBitFlipped). A batch may hold pages of zeros as
// content, a value of zeros, so the zero page alone does not tell.
func lostPageIn(f *os.File, bad, next int64) (bool, error) {
	zero, err := zeroPageWithin(f, bad, next)
	if err == nil && !zero {
		zero, err = zeroPageTail(f, bad, next)
	}
	if err != nil || !zero {
		return false, err
	}
	batch := make([]byte, next-bad)
	if _, err := f.ReadAt(batch, bad); err != nil {
		return false, err
	}
	return !record.OneBitFlipped(batch), nil
}

// zeroPageWithin reports whether [from, to) of f contains a whole,
// page-aligned page of zeros.
func zeroPageWithin(f *os.File, from, to int64) (bool, error) {
	page := make([]byte, pageSize)
	zeros := make([]byte, pageSize)
	for p := (from + pageSize - 1) / pageSize * pageSize; p+pageSize <= to; p += pageSize {
		if _, err := f.ReadAt(page, p); err != nil {
			return false, err
		}
		if bytes.Equal(page, zeros) {
			return true, nil
		}
	}
	return false, nil
}

// zeroPageTail reports whether the page of f that bad lies in holds zeros
// from bad to its end, next lying past it. A lost page reads as it did at
// the last fsync, not always as zeros: when the fsynced data ended inside
// it, it holds that data and zeros after, and the first batch after the
// data starts in it (bad). The zeros must cover the batch's BaseOffset
// and BatchLength, which a batch never has both zero, so they are no
// bit flip of a header.
func zeroPageTail(f *os.File, bad, next int64) (bool, error) {
	end := (bad/pageSize + 1) * pageSize
	if end-bad < record.LogOverhead || end > next {
		return false, nil
	}
	b := make([]byte, end-bad)
	if _, err := f.ReadAt(b, bad); err != nil {
		return false, err
	}
	return bytes.Equal(b, make([]byte, len(b))), nil
}

// dataEndAfter returns the position just past the last byte of f in
// [from, size) that is not zero, or from if they all are: space
// preallocated past the last batch (segment.go), or blocks a crash lost. No
// batch starts at or after it, since a batch's length field is not zero.
// It reads backwards a window at a time, so a long zero tail costs a
// comparison per window rather than a batch check per byte.
func dataEndAfter(f *os.File, from, size int64) (int64, error) {
	const window = 1 << 20
	buf := make([]byte, min(window, max(size-from, 0)))
	zeros := make([]byte, len(buf))
	for end := size; end > from; {
		start := max(from, end-window)
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil && err != io.EOF {
			return 0, err
		}
		if !bytes.Equal(b, zeros[:len(b)]) {
			i := len(b) - 1
			for b[i] == 0 {
				i--
			}
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return from, nil
}

// rebuildEpochs rebuilds the epoch index from the batch headers of every
// segment, for an index file that could not be read.
func (l *Log) rebuildEpochs() error {
	l.epochs = epochIndex{}
	for _, s := range l.segments {
		f, err := s.file.pin()
		if err != nil {
			return err
		}
		r := newHeadReader(f, s.size)
		for pos := int64(0); pos < s.size; {
			h, err := r.at(pos)
			if err != nil {
				s.file.unpin()
				return &CorruptionError{File: s.logPath, Pos: pos, Err: err}
			}
			l.epochs.assign(h.epoch, h.baseOffset)
			pos += h.size
		}
		s.file.unpin()
	}
	return nil
}

// settleEpochs fits the epoch index to the log Open found, [start, end):
// entries of batches a crash tore off go, entries below the start
// collapse into one at the start. The file is rewritten if that, or the
// batches verified since stored (what the file held), changed the index,
// and always after a rebuild (the file could not be read).
func (l *Log) settleEpochs(stored []EpochStart, rebuilt bool) error {
	l.epochs.truncateTo(l.end)
	l.epochs.truncateFromStart(l.start)
	if !rebuilt && slices.Equal(stored, l.epochs.entries) {
		return nil
	}
	return l.writeEpochsLocked()
}
