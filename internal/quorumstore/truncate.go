package quorumstore

import (
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
// offset the next record gets). The command is a batch of its own, so
// that the truncator finds it without decoding the others. Called by the
// queue served here, under its lock.
func (s *Store) TruncateLocked(below int64) {
	s.mu.Lock()
	below = min(below, s.end)
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
	if err := s.walkBatches(from, func(h record.Header, batch []byte) (bool, error) {
		if key, ok := soleKey(h, batch); !ok || string(key) != string(truncateKey) {
			return true, nil // not a truncate, which travels alone
		}
		recs, err := record.Records(batch)
		if err != nil {
			return false, err
		}
		if off, _, err := decodeCommand(recs[0].Value); err == nil {
			below = max(below, off)
		}
		return true, nil
	}); err != nil {
		s.logger.Warn("quorumstore: reading the log for truncations failed; retrying", "from", from, "err", err)
		return from
	}
	if below > s.log.StartOffset() {
		if _, err := s.log.DeleteBefore(below); err != nil {
			s.logger.Warn("quorumstore: truncating the log failed; retrying", "below", below, "err", err)
			return from
		}
	}
	return hw
}
