package seglog

import (
	"fmt"
	"io"

	"github.com/wharf-mq/wharf/internal/record"
)

// OffsetForTime returns the first record at or after the log start offset
// whose timestamp is >= ts, as ListOffsets by timestamp answers: the first
// segment whose largest timestamp reaches ts, its time index to skip the
// batches that cannot qualify, a walk over batch headers to the first batch
// whose MaxTimestamp reaches ts, and the records of that batch. found is
// false if no record qualifies. In a LogAppendTime batch every record has
// the batch's MaxTimestamp.
func (l *Log) OffsetForTime(ts int64) (offset, timestamp int64, found bool, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, 0, false, ErrClosed
	}
	start := l.start
	v, ok, err := l.timeCandidateLocked(ts, 0)
	l.mu.RUnlock()
	for ok && err == nil {
		offset, timestamp, found, err = v.offsetForTime(ts, start)
		v.release()
		if err != nil || found {
			return offset, timestamp, found, err
		}
		// Only records below the start offset matched: try later segments.
		// (By offset, not by base: compaction may have merged the segment
		// with the ones after it meanwhile.)
		l.mu.RLock()
		v, ok, err = l.timeCandidateLocked(ts, v.next)
		l.mu.RUnlock()
	}
	if err != nil {
		return 0, 0, false, err
	}
	return -1, -1, false, nil
}

// timeCandidateLocked returns a view of the first segment holding offsets
// at or after from whose largest timestamp is >= ts.
func (l *Log) timeCandidateLocked(ts, from int64) (segView, bool, error) {
	if l.closed {
		return segView{}, false, nil
	}
	for _, s := range l.segments {
		if s.next > from && s.idx.maxTs >= ts {
			v, err := s.viewLocked()
			return v, err == nil, err
		}
	}
	return segView{}, false, nil
}

func (v segView) offsetForTime(ts, start int64) (int64, int64, bool, error) {
	pos := int64(0)
	if rel, ok := relBeforeTime(v.times, ts); ok {
		pos = posForOffset(v.offsets, rel)
	}
	r := newHeadReader(v.f, v.limit)
	for pos < v.limit {
		h, err := r.at(pos)
		if err != nil {
			return 0, 0, false, err
		}
		if h.maxTimestamp >= ts && h.lastOffset >= start {
			off, t, found, err := v.firstRecordAtOrAfter(pos, h, func(off, t int64) bool { return off >= start && t >= ts })
			if err != nil || found {
				return off, t, found, err
			}
		}
		pos += h.size
	}
	return 0, 0, false, nil
}

// firstRecordAtOrAfter decodes the batch at pos and returns the first record
// (offset, timestamp) that match accepts.
func (v segView) firstRecordAtOrAfter(pos int64, h batchHead, match func(off, t int64) bool) (int64, int64, bool, error) {
	batch, err := readBatch(v.f, pos, h)
	if err != nil {
		return 0, 0, false, err
	}
	hdr, err := record.ParseHeader(batch)
	if err != nil {
		return 0, 0, false, fmt.Errorf("seglog: %s:%d: %w", v.seg.logPath, pos, err)
	}
	recs, err := record.Records(batch)
	if err != nil {
		return 0, 0, false, fmt.Errorf("seglog: %s:%d: %w", v.seg.logPath, pos, err)
	}
	for _, rec := range recs {
		off := hdr.BaseOffset + int64(rec.OffsetDelta)
		t := hdr.BaseTimestamp + rec.TimestampDelta
		if hdr.LogAppendTime() {
			t = hdr.MaxTimestamp
		}
		if match(off, t) {
			return off, t, true, nil
		}
	}
	return 0, 0, false, nil
}

// MaxTimestamp returns the largest timestamp in the log and the offset of the
// first record carrying it (ListOffsets MAX_TIMESTAMP, -3), or (-1, -1) when
// no record has a timestamp. Like Kafka it looks at every retained segment,
// including records of the first one below a DeleteBefore start offset.
func (l *Log) MaxTimestamp() (offset, timestamp int64) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return -1, -1
	}
	var best *segment
	for _, s := range l.segments {
		if s.idx.maxTs >= 0 && (best == nil || s.idx.maxTs > best.idx.maxTs) {
			best = s
		}
	}
	if best == nil {
		l.mu.RUnlock()
		return -1, -1
	}
	v, err := best.viewLocked()
	maxTs, batchBase := best.idx.maxTs, best.idx.maxTsBase
	l.mu.RUnlock()
	if err != nil {
		l.logger.Warn("max timestamp lookup failed", "file", best.logPath, "err", err)
		return -1, -1
	}
	defer v.release()

	off, foundBase, found, err := v.maxTimestampOffset(maxTs, batchBase)
	if err != nil || !found {
		l.logger.Warn("max timestamp lookup failed", "file", v.seg.logPath, "err", err)
		return -1, -1
	}
	if batchBase < 0 {
		// Cache where the maximum is, unless an append moved it meanwhile.
		l.mu.Lock()
		if best.idx.maxTs == maxTs && best.idx.maxTsBase < 0 {
			best.idx.maxTsBase = foundBase
		}
		l.mu.Unlock()
	}
	return off, maxTs
}

// maxTimestampOffset finds the first record with timestamp maxTs and the base
// offset of its batch, starting from the batch based at batchBase if known,
// else from the segment start.
func (v segView) maxTimestampOffset(maxTs, batchBase int64) (off, base int64, found bool, err error) {
	r := newHeadReader(v.f, v.limit)
	pos := int64(0)
	if batchBase >= 0 {
		pos = posForOffset(v.offsets, uint32(batchBase-v.seg.base))
	}
	for pos < v.limit {
		h, err := r.at(pos)
		if err != nil {
			return 0, 0, false, err
		}
		if h.maxTimestamp == maxTs && h.baseOffset >= batchBase {
			off, _, found, err := v.firstRecordAtOrAfter(pos, h, func(_, t int64) bool { return t == maxTs })
			if err != nil {
				return 0, 0, false, err
			}
			if !found {
				off = h.lastOffset // header and records disagree; Kafka's older answer
			}
			return off, h.baseOffset, true, nil
		}
		pos += h.size
	}
	return 0, 0, false, io.ErrUnexpectedEOF
}
