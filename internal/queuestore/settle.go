package queuestore

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Settlement bookkeeping of a durable queue and its background upkeep.

// SettleLocked records that the message at off is settled (acknowledged,
// dropped or dead-lettered): it is not recovered after a restart once the
// housekeeper has written the settlement. Caller holds the queue's lock.
func (s *Store) SettleLocked(off int64) {
	s.win.settle(off)
	s.pending = append(s.pending, off)
	if len(s.counts) > 0 {
		delete(s.counts, off)
		delete(s.pendingCounts, off)
	}
	if len(s.pending) == settleFlushThreshold {
		s.root.HousekeepSoon()
	}
}

// NoteReturnLocked records the delivery count of the message at off (a
// quorum queue's return), written with the settlements. Caller holds the
// queue's lock.
func (s *Store) NoteReturnLocked(off int64, n uint32) {
	s.counts[off] = n
	if s.pendingCounts == nil {
		s.pendingCounts = make(map[int64]uint32)
	}
	s.pendingCounts[off] = n
	if len(s.pendingCounts) == settleFlushThreshold {
		s.root.HousekeepSoon()
	}
}

// settleFlushThreshold is how many settlements wait in memory before the
// housekeeper is asked to write them (otherwise its next tick does).
const settleFlushThreshold = 4096

// compactMinBytes is the settlement log size below which it is never
// compacted; above it, it is compacted once it has doubled since the last
// compaction. A variable so tests can lower it.
var compactMinBytes int64 = 1 << 20

// Housekeep writes pending settlements, moves the messages log start past
// the settled prefix (deleting whole segments) and compacts the settlement
// log when it has grown. The root's housekeeper calls it on every open
// store, on a timer and when many settlements are pending; tests call it
// to have settlements written now.
func (s *Store) Housekeep() error {
	lock := s.qmu
	s.mu.Lock()
	defer s.mu.Unlock()
	messages := s.messages.Load()
	if s.closed || messages == nil {
		return nil // nothing logged, so nothing settled
	}
	lock.Lock()
	// A settlement record must never name an offset the messages log
	// lacks: should the process die with the message unwritten, the
	// offset would go to another message after the restart, settled
	// already.
	if err := s.writeUnwrittenLocked(); err != nil {
		lock.Unlock()
		return err
	}
	pending := s.pending
	s.pending = nil
	counts := s.pendingCounts
	s.pendingCounts = nil
	low := s.win.base
	lock.Unlock()

	if len(pending) > 0 {
		if err := s.writeSettled(rangesOf(pending)); err != nil {
			lock.Lock()
			s.pending = append(s.pending, pending...) // try again next time
			s.restoreCountsLocked(counts)
			lock.Unlock()
			return err
		}
	}
	if len(counts) > 0 {
		if err := s.writeCounts(counts); err != nil {
			lock.Lock()
			s.restoreCountsLocked(counts)
			lock.Unlock()
			return err
		}
	}
	if low > messages.StartOffset() && low != s.checkedLow {
		// Moving the start costs a directory fsync; do it only when a
		// whole segment can go.
		s.checkedLow = low
		reclaimable, err := segmentBelow(messages, low)
		if err != nil {
			return err
		}
		if reclaimable {
			if _, err := messages.DeleteBefore(low); err != nil {
				return err
			}
		}
	}
	if s.settled == nil {
		return nil
	}
	size := s.settled.Size()
	if size < compactMinBytes || size < 2*s.compactedAt {
		return nil
	}
	return s.compactLocked(messages, lock)
}

// compactLocked writes one record naming every settled offset still above
// the messages log start, makes it durable, and drops everything before it.
// Caller holds mu; the settlement log exists.
func (s *Store) compactLocked(messages *replica.Local, lock *sync.Mutex) error {
	lock.Lock()
	if err := s.writeUnwrittenLocked(); err != nil { // as in Housekeep
		lock.Unlock()
		return err
	}
	// Everything from the messages log start up to base is settled too;
	// the records that said so are about to go.
	var snapshot [][2]int64
	if start := messages.StartOffset(); start < s.win.base {
		snapshot = append(snapshot, [2]int64{start, s.win.base})
	}
	s.win.ranges(func(from, to int64) { snapshot = append(snapshot, [2]int64{from, to}) })
	// Settlements (and delivery counts) pending now are in the snapshot
	// already; writing them again after the checkpoint is harmless.
	counts := maps.Clone(s.counts)
	lock.Unlock()
	at := s.settled.EndOffset()
	if len(snapshot) > 0 {
		if err := s.writeSettled(snapshot); err != nil {
			return err
		}
	}
	if len(counts) > 0 {
		if err := s.writeCounts(counts); err != nil {
			return err
		}
	}
	if err := s.settled.Sync(); err != nil {
		return err
	}
	if _, err := s.settled.DeleteBefore(at); err != nil {
		return err
	}
	s.compactedAt = s.settled.Size()
	return nil
}

// restoreCountsLocked puts back delivery counts whose write failed, unless
// newer ones or a settlement came meanwhile.
func (s *Store) restoreCountsLocked(counts map[int64]uint32) {
	for off, n := range counts {
		if cur, live := s.counts[off]; !live || cur != n {
			continue
		}
		if _, newer := s.pendingCounts[off]; newer {
			continue
		}
		if s.pendingCounts == nil {
			s.pendingCounts = make(map[int64]uint32)
		}
		s.pendingCounts[off] = n
	}
}

// writeCounts and writeSettled append to the settlement log, creating it
// on first use. Caller holds mu.
func (s *Store) writeCounts(counts map[int64]uint32) error {
	return s.writeSettlementRecord(countRecordKey, encodeCounts(counts), slices.Max(slices.Collect(maps.Keys(counts)))+1)
}

// writeSettled writes ranges, ascending [from, to) runs.
func (s *Store) writeSettled(ranges [][2]int64) error {
	return s.writeSettlementRecord(settleRecordKey, encodeRanges(ranges), ranges[len(ranges)-1][1])
}

// writeSettlementRecord appends a record naming offsets below through. It
// first makes the messages log durable up to there (one fsync, shared
// with any confirm's, when it is not yet): the settlement log may be
// fsynced at any time (a roll, the file cache closing it, a compaction),
// and a settlement made durable for a message a power cut then takes
// from the messages log would settle the next message to get its offset.
func (s *Store) writeSettlementRecord(key, value []byte, through int64) error {
	if err := s.messagesDurableThrough(through); err != nil {
		return err
	}
	l, err := s.settledLog()
	if err != nil {
		return err
	}
	batch := record.NewBatch(time.Now().UnixMilli(), []record.Record{{Key: key, Value: value}})
	_, err = l.Append(batch, replica.AppendOptions{})
	return err
}

// messagesDurableThrough returns once every offset of the messages log
// below end is durable, fsyncing it if needed. end must not pass what was
// written to the log.
func (s *Store) messagesDurableThrough(end int64) error {
	if s.syncedEnd.Load() >= end {
		return nil
	}
	l := s.messages.Load()
	if written := l.EndOffset(); end > written {
		return fmt.Errorf("settlement of offset %d, beyond the end %d of the messages log", end-1, written)
	}
	if err := l.Commit(end).Wait(context.Background()); err != nil {
		return err
	}
	s.advanceSynced(end)
	return nil
}

// segmentBelow reports whether messages, a queue's messages log, has a
// segment other than the first whose base offset is at or below low, i.e.
// whether moving the start to low deletes at least one segment file. Segment files are named
// by their 20-digit base offset (seglog's documented layout).
func segmentBelow(messages *replica.Local, low int64) (bool, error) {
	entries, err := os.ReadDir(messages.Dir())
	if err != nil {
		return false, err
	}
	start := messages.StartOffset()
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || len(name) != 20 {
			continue
		}
		base, err := strconv.ParseInt(name, 10, 64)
		if err == nil && base > start && base <= low {
			return true, nil
		}
	}
	return false, nil
}
