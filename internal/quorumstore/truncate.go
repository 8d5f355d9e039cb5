package quorumstore

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// Truncation: the log of a queue would otherwise keep every command
// forever. The leader proposes truncate(below), below being its queue's
// lowest unsettled message (TruncateLocked); the command follows, in log
// order, the settlement of every message below it, and commands name
// only messages before them, so nothing below it counts for the queue's
// state any more. Each replica (leader and followers alike) reads its
// committed log as it grows (truncator) and, at a committed truncate,
// deletes its log below the offset named: the same cut on every replica,
// from committed entries only. A follower that lags beyond a cut catches
// up from the leader's log as it starts now (Raft's snapshot of a
// RaftLog).

// TruncateEvery is how often the truncator reads the new part of the
// committed log (and the queueing core proposes a truncate).
const TruncateEvery = time.Second

// TruncateLocked proposes truncate(below) if below is past the last
// one proposed: every message below it is settled (below is capped at the
// offset the next record gets, and at the first message of a forward
// taken less than keep ago, which a new leader must find in the log to
// take a repeat of it only once: Forwards). The command is a batch of its
// own, so that the truncator finds it without decoding the others.
// Called by the queue served here, under its lock.
func (s *Store) TruncateLocked(below int64, keep time.Duration) {
	s.mu.Lock()
	below = min(below, s.end)
	young := time.Now().Add(-keep).UnixMilli()
	for len(s.kept) > 0 && s.kept[0].at < young {
		s.kept = s.kept[1:]
	}
	if len(s.kept) > 0 {
		below = min(below, s.kept[0].off)
	}
	past := below > s.truncatedAt && s.term.failure == nil
	if past {
		s.truncatedAt = below
		s.closeBatchLocked()
		s.pending = append(s.pending, record.NewBatch(time.Now().UnixMilli(), []record.Record{truncateCommand(below)})...)
		s.end++
	}
	s.mu.Unlock()
	if past {
		s.signal()
	}
}

// truncator applies the committed truncates of the log, at most every
// TruncateEvery, until Close.
func (s *Store) truncator() {
	defer close(s.truncatorDone)
	scanned := s.log.StartOffset()
	tick := time.NewTicker(TruncateEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		scanned = s.applyTruncates(scanned)
	}
}

// applyTruncates reads the committed log from offset from on and deletes
// the log below the last truncate it finds; it returns where it stopped.
func (s *Store) applyTruncates(from int64) int64 {
	from = max(from, s.log.StartOffset())
	hw := s.log.HighWatermark()
	below := int64(-1)
	for off := from; off < hw; {
		next, b, err := s.scanTruncates(off)
		if err != nil {
			s.logger.Warn("quorumstore: reading the log for truncations failed; retrying", "from", from, "err", err)
			return from
		}
		off, below = next, max(below, b)
	}
	if below > s.log.StartOffset() {
		if _, err := s.log.DeleteBefore(below); err != nil {
			s.logger.Warn("quorumstore: truncating the log failed; retrying", "below", below, "err", err)
			return from
		}
	}
	return hw
}

// truncateScanBytes is how much of the log one read of the truncator
// spans. It reads the batches' headers, not what lies between them, so
// a read may span much.
const truncateScanBytes = 64 << 20

// maxTruncateBatch is the most bytes a batch holding a truncate alone
// takes (with room to spare).
const maxTruncateBatch = 256

// scanTruncates reads the committed batches of one read of the log from
// the one holding off, and returns the offset after the last one and the
// highest offset a truncate among them names (-1: none). Of each batch
// it reads the header, and the rest only if the header says it may be a
// truncate, which travels alone (TruncateLocked): one small uncompressed
// record. The messages and commands around them, most of the log, stay
// unread.
func (s *Store) scanTruncates(off int64) (next, below int64, err error) {
	sl, err := s.log.Read(off, truncateScanBytes)
	if err != nil {
		return 0, 0, err
	}
	defer sl.Release()
	next, below = off, -1
	var head [record.HeaderSize]byte
	for _, c := range sl.Chunks {
		for pos := c.Pos; pos < c.Pos+c.Len; {
			if _, err := c.File.ReadAt(head[:], pos); err != nil {
				return 0, 0, err
			}
			size, last, lone, err := peekHeader(head[:])
			if err != nil {
				return 0, 0, err
			}
			if lone && size <= maxTruncateBatch {
				b, err := readTruncate(c.File, pos, size)
				if err != nil {
					return 0, 0, err
				}
				below = max(below, b)
			}
			next = last + 1
			pos += int64(size)
		}
	}
	if next == off {
		return 0, 0, fmt.Errorf("quorumstore: no record at offset %d below %d", off, s.log.HighWatermark())
	}
	return next, below, nil
}

// peekHeader reads, from the header of a batch (its first
// record.HeaderSize bytes), its size, its last offset, and whether it
// holds one uncompressed record (record.ParseHeader wants the whole
// batch).
func peekHeader(head []byte) (size int, last int64, lone bool, err error) {
	be := binary.BigEndian
	length := int32(be.Uint32(head[8:]))
	if length < record.HeaderSize-record.LogOverhead {
		return 0, 0, false, fmt.Errorf("quorumstore: a batch of the log says it has %d bytes", length)
	}
	h := record.Header{Attributes: int16(be.Uint16(head[21:])), LastOffsetDelta: int32(be.Uint32(head[23:]))}
	last = int64(be.Uint64(head[0:])) + int64(h.LastOffsetDelta)
	return record.LogOverhead + int(length), last, h.LastOffsetDelta == 0 && h.Compression() == record.None, nil
}

// readTruncate reads the batch of size bytes at pos of f and returns the
// offset it names if it is a truncate, else -1.
func readTruncate(f *os.File, pos int64, size int) (int64, error) {
	batch := make([]byte, size)
	if _, err := f.ReadAt(batch, pos); err != nil {
		return 0, err
	}
	h, err := record.ParseHeader(batch)
	if err != nil {
		return 0, err
	}
	if key, ok := soleKey(h, batch); !ok || string(key) != string(truncateKey) {
		return -1, nil
	}
	recs, err := record.Records(batch)
	if err != nil {
		return 0, err
	}
	off, _, err := decodeCommand(recs[0].Value)
	if err != nil {
		return -1, nil // not a truncate after all
	}
	return off, nil
}
