package mq

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// A durable queue's directory, DataDir/queues/<id>/, holds:
const (
	messagesLogDir = "messages"       // seglog: one record per persistent message
	settledLogDir  = "settled"        // seglog: records naming settled message offsets
	cleanFile      = "clean-shutdown" // written by Close: the delivered watermark
)

// queueStore is a durable queue's storage: the messages log, the settlement
// log and the in-memory settlement state.
//
// Appends to the messages log happen under the queue's lock (so log order is
// queue order). Everything written to the settlement log is written by the
// registry's housekeeper goroutine (housekeep) or by close, under mu; so a
// compaction snapshot can never overtake a settlement record written
// concurrently.
type queueStore struct {
	dir      string
	messages *seglog.Log
	settled  *seglog.Log
	logger   *slog.Logger
	qmu      *sync.Mutex // the owning queue's lock

	// Guarded by qmu.
	win       settleWindow // settled offsets of the messages log
	pending   []int64      // settled offsets not yet written to the settlement log
	delivered int64        // highest offset ever handed to a consumer, -1 if none
	// counts are the delivery counts (returns) of unsettled messages of a
	// quorum queue, by offset; pendingCounts those not written yet.
	counts        map[int64]uint32
	pendingCounts map[int64]uint32

	// syncedEnd is an offset below which the messages log is known to be
	// fsynced (by the syncer): what publisher confirms rely on.
	syncedEnd atomic.Int64

	// Guarded by mu (taken before the queue's mu).
	mu          sync.Mutex
	closed      bool
	compactedAt int64 // settlement log size right after the last compaction
	checkedLow  int64 // the settled prefix last looked at for reclaiming
}

func queueStoreDir(dataDir, id string) string { return filepath.Join(dataDir, "queues", id) }

// recovered says what a durable queue's store held when it was opened.
type recovered struct {
	// clean is true after a clean shutdown; then delivered is the highest
	// offset handed to a consumer before it (-1: none). After a crash
	// every recovered message may have been delivered.
	clean     bool
	delivered int64
}

// redelivered reports whether the recovered message at off must be marked
// redelivered: it was, or may have been, delivered before the restart.
func (r recovered) redelivered(off int64) bool { return !r.clean || off <= r.delivered }

// openQueueStore opens (creating) a durable queue's logs and rebuilds the
// settlement state; forEachUnsettled then lists the messages to recover.
func openQueueStore(dir string, cfg seglog.Config, logger *slog.Logger) (*queueStore, recovered, error) {
	var rec recovered
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, rec, err
	}
	var err error
	rec.delivered, rec.clean, err = takeCleanMarker(dir)
	if err != nil {
		return nil, rec, err
	}
	messages, err := seglog.Open(filepath.Join(dir, messagesLogDir), cfg, logger)
	if err != nil {
		return nil, rec, err
	}
	settled, err := seglog.Open(filepath.Join(dir, settledLogDir), cfg, logger)
	if err != nil {
		messages.Close()
		return nil, rec, err
	}
	s := &queueStore{dir: dir, messages: messages, settled: settled, logger: logger, delivered: -1,
		counts: make(map[int64]uint32)}
	s.win = newSettleWindow(messages.StartOffset())
	end := messages.EndOffset()
	err = readLog(settled, func(r record.Record) error {
		if string(r.Key) == string(countRecordKey) {
			return decodeCounts(r.Value, func(off int64, n uint32) { s.counts[off] = n })
		}
		return decodeRanges(r.Value, func(from, to int64) {
			for off := max(from, s.win.base); off < min(to, end); off++ {
				s.win.settle(off)
			}
		})
	})
	for off := range s.counts {
		if off >= end || s.win.isSettled(off) {
			delete(s.counts, off)
		}
	}
	if err != nil {
		// Close the logs without a clean-shutdown marker: nothing was
		// recovered, so nothing can be vouched for.
		messages.Close()
		settled.Close()
		return nil, rec, fmt.Errorf("read settlement log: %w", err)
	}
	s.compactedAt = settled.Size()
	return s, rec, nil
}

// forEachUnsettled calls fn for every logged offset not settled, in order.
func (s *queueStore) forEachUnsettled(fn func(off int64)) {
	for off, end := s.win.base, s.messages.EndOffset(); off < end; off++ {
		if !s.win.isSettled(off) {
			fn(off)
		}
	}
}

// append logs one message batch (built by encodeMessage) and returns its
// offset. It does not wait for fsync; the syncer does that for confirms.
// The batch's base offset is rewritten in place, so a batch may be appended
// to several logs one after the other but not concurrently.
func (s *queueStore) append(batch []byte) (int64, error) {
	res, err := s.messages.Append(batch, seglog.AppendOptions{})
	if err != nil {
		return 0, err
	}
	return res.BaseOffset, nil
}

// read calls fn for each message from offset on, with its offset and
// enqueue time (ms), as far as maxBytes of batches reach (at least one
// message), until fn returns false.
func (s *queueStore) read(offset, maxBytes int64, fn func(off, ts int64, m *Message) bool) error {
	sl, err := s.messages.Read(offset, maxBytes)
	if err != nil {
		return err
	}
	data, err := sl.Bytes()
	sl.Release()
	if err != nil {
		return err
	}
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil {
			return err
		}
		recs, err := record.Records(data[:h.Size()])
		if err != nil {
			return err
		}
		for i, r := range recs {
			off := h.BaseOffset + int64(i)
			if off < offset {
				continue
			}
			m, err := decodeMessage(r)
			if err != nil {
				return fmt.Errorf("message at offset %d: %w", off, err)
			}
			if !fn(off, h.BaseTimestamp+r.TimestampDelta, m) {
				return nil
			}
		}
		data = data[h.Size():]
	}
	return nil
}

// scanBytes is how much of the messages log one step of scan reads.
const scanBytes = 1 << 20

// scan calls fn for every message from offset to the end of the log.
func (s *queueStore) scan(offset int64, fn func(off, ts int64, m *Message)) error {
	for offset < s.messages.EndOffset() {
		next := offset
		err := s.read(offset, scanBytes, func(off, ts int64, m *Message) bool {
			fn(off, ts, m)
			next = off + 1
			return true
		})
		if err != nil {
			return err
		}
		if next == offset {
			return fmt.Errorf("no message at offset %d below end %d", offset, s.messages.EndOffset())
		}
		offset = next
	}
	return nil
}

// closeWithoutMarker closes the logs of a store that was not recovered.
func (s *queueStore) closeWithoutMarker() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.messages.Close()
	s.settled.Close()
}

// sync fsyncs the messages log. A store closed meanwhile (queue deleted, or
// registry closed, which fsyncs) counts as synced: RabbitMQ confirms a
// message whose queue was deleted.
func (s *queueStore) sync() error {
	end := s.messages.EndOffset()
	err := s.messages.Sync()
	if err == nil {
		s.advanceSynced(end)
	}
	if errors.Is(err, seglog.ErrClosed) {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return nil
		}
	}
	return err
}

// close writes pending settlements and the clean-shutdown marker and closes
// both logs (which fsyncs them).
func (s *queueStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var pending []int64
	var counts map[int64]uint32
	delivered := s.delivered
	if s.qmu != nil {
		s.qmu.Lock()
		pending, s.pending = s.pending, nil
		counts, s.pendingCounts = s.pendingCounts, nil
		delivered = s.delivered
		s.qmu.Unlock()
	}
	var errs []error
	if len(pending) > 0 {
		errs = append(errs, s.writeSettled(rangesOf(pending)))
	}
	if len(counts) > 0 {
		errs = append(errs, s.writeCounts(counts))
	}
	errs = append(errs, s.messages.Close(), s.settled.Close())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return writeCleanMarker(s.dir, delivered)
}

// delete closes the logs and removes the queue's directory.
func (s *queueStore) delete() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := errors.Join(s.messages.Delete(), s.settled.Delete())
	return errors.Join(err, os.RemoveAll(s.dir))
}

func (s *queueStore) advanceSynced(end int64) {
	for {
		cur := s.syncedEnd.Load()
		if end <= cur || s.syncedEnd.CompareAndSwap(cur, end) {
			return
		}
	}
}
