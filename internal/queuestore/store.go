package queuestore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Store is a durable queue's storage: the messages log, the settlement
// log and the in-memory settlement state.
//
// The logs are created on first use, not when the queue is declared: the
// queue's existence is durable through its definition alone, and an empty
// queue needs no files. The messages log (and the queue's directory) is
// created by the first append, the settlement log by the first settlement
// record. So a declare costs one definition write and no file at all,
// whatever the number of queues; a queue whose directory is missing at
// Open is simply empty.
//
// Appends to the messages log happen under the queue's lock (so log order is
// queue order). Everything written to the settlement log is written by the
// root's housekeeper goroutine (Housekeep) or by close, under mu; so a
// compaction snapshot can never overtake a settlement record written
// concurrently.
type Store struct {
	root   *Root
	dir    string
	queue  string // the owner's name, for errors
	logger *slog.Logger
	qmu    *sync.Mutex     // the owning queue's lock
	crash  func(err error) // takes the queue out of service (Owner.Crash)

	// messages is nil until the first message is logged. It is set under
	// qmu and read without a lock (the syncer).
	messages atomic.Pointer[replica.Local]
	// newDir says that this queue's directory was created by this
	// process and the entries naming it and its messages log are not
	// known fsynced yet (set before messages, see syncNewDir), dirChange
	// the root directory's change that created it.
	newDir    atomic.Bool
	dirChange uint64

	// Guarded by qmu.
	ended bool // closed or deleted: no log may be created any more
	// unwritten holds the batches of messages enqueued but not yet
	// written to the messages log, back to back, unwrittenCount their
	// messages: the next one gets offset end+unwrittenCount (see
	// BufferLocked). nil when empty; from unwrittenPool otherwise.
	unwritten      *[]byte
	unwrittenCount int64
	win            settleWindow // settled offsets of the messages log
	pending        []int64      // settled offsets not yet written to the settlement log
	delivered      int64        // highest offset ever handed to a consumer, -1 if none
	// counts are the delivery counts (returns) of unsettled messages of a
	// quorum queue, by offset; pendingCounts those not written yet.
	counts        map[int64]uint32
	pendingCounts map[int64]uint32
	// recovered says what the logs held at Open (Unsettled).
	recovered recovered

	// syncedEnd is an offset below which the messages log is known to be
	// fsynced (by the syncer): what publisher confirms rely on.
	syncedEnd atomic.Int64

	// Guarded by mu (taken before the queue's mu).
	mu          sync.Mutex
	settled     *replica.Local // nil until the first settlement record
	closed      bool
	fate        storeFate // how the store ended, once closed
	compactedAt int64     // settlement log size right after the last compaction
	checkedLow  int64     // the settled prefix last looked at for reclaiming
}

// storeFate is how a store ended, which decides what a publisher confirm
// still waiting for it gets (see Sync).
type storeFate uint8

const (
	// closedUnsure: closed without vouching for what was logged (a
	// failed close, or a store given up on). Waiting confirms fail.
	closedUnsure storeFate = iota
	// closedDurable: close wrote and fsynced every logged message.
	closedDurable
	// deleted: the queue was deleted with its messages; RabbitMQ
	// confirms a message whose queue was deleted, and so does Wharf.
	deleted
)

// recovered says what a durable queue's store held when it was opened.
type recovered struct {
	// clean is true after a clean shutdown (or for a new store); then
	// delivered is the highest offset handed to a consumer before it
	// (-1: none). After a crash every recovered message may have been
	// delivered.
	clean     bool
	delivered int64
}

// redelivered reports whether the recovered message at off must be marked
// redelivered: it was, or may have been, delivered before the restart.
func (r recovered) redelivered(off int64) bool { return !r.clean || off <= r.delivered }

// open opens an existing durable queue's logs and rebuilds the settlement
// state. On error no log is left open.
func (s *Store) open() error {
	dir := s.dir
	if ok, err := dirExists(filepath.Join(dir, MessagesLog)); err != nil || !ok {
		if err == nil {
			err = os.RemoveAll(dir)
		}
		return err
	}
	var err error
	s.recovered.delivered, s.recovered.clean, err = takeCleanMarker(dir)
	if err != nil {
		return err
	}
	s.delivered = max(s.delivered, s.recovered.delivered)
	messages, err := s.root.openLog(filepath.Join(dir, MessagesLog), s.logger)
	if err != nil {
		return err
	}
	s.messages.Store(messages)
	s.win = newSettleWindow(messages.StartOffset())
	if err := s.openSettlementLog(); err != nil {
		// Close the logs without a clean-shutdown marker: nothing was
		// recovered, so nothing can be vouched for.
		messages.Close()
		s.messages.Store(nil)
		if s.settled != nil {
			s.settled.Close()
			s.settled = nil
		}
		return err
	}
	return nil
}

// openSettlementLog opens the settlement log, if there is one, and applies
// it to the settlement state of the messages log just opened.
func (s *Store) openSettlementLog() error {
	if ok, err := dirExists(filepath.Join(s.dir, SettlementLog)); err != nil || !ok {
		return err // !ok: nothing ever settled
	}
	settled, err := s.root.openLog(filepath.Join(s.dir, SettlementLog), s.logger)
	if err != nil {
		return err
	}
	s.settled = settled
	messages := s.messages.Load()
	end := messages.EndOffset()
	stale := 0 // records naming offsets the messages log does not have
	err = readLog(settled, func(r record.Record) error {
		if string(r.Key) == string(countRecordKey) {
			return decodeCounts(r.Value, func(off int64, n uint32) { s.counts[off] = n })
		}
		return decodeRanges(r.Value, func(from, to int64) {
			if to > end {
				stale++
			}
			for off := max(from, s.win.base); off < min(to, end); off++ {
				s.win.settle(off)
			}
		})
	})
	for off := range s.counts {
		if off >= end {
			stale++
		}
		if off >= end || s.win.isSettled(off) {
			delete(s.counts, off)
		}
	}
	if err != nil {
		return fmt.Errorf("read settlement log: %w", err)
	}
	if stale > 0 {
		if err := s.dropStaleSettlements(messages, stale); err != nil {
			return err
		}
	}
	s.compactedAt = settled.Size()
	return nil
}

// dropStaleSettlements rewrites the settlement log without its records of
// offsets at or past the end of the messages log. Such records outlived
// their messages: a power cut took the messages log's tail after they
// were made durable (by a version that did not make the messages durable
// first, see writeSettlementRecord). Left in place they would settle the
// messages published next, which get those offsets, at the next start.
func (s *Store) dropStaleSettlements(messages *replica.Local, stale int) error {
	s.logger.Warn("queuestore: dropping settlements of messages the queue's log does not hold (its tail was lost)",
		"dir", s.dir, "log_end", messages.EndOffset(), "stale", stale)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.compactLocked(messages, s.qmu); err != nil {
		return fmt.Errorf("drop stale settlements: %w", err)
	}
	return nil
}

func dirExists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// messagesLogLocked returns the messages log, creating the queue's
// directory and the log on first use. Caller holds the queue's lock.
//
// No fsync of the new directories runs here, on the publish path: the
// first sync (the syncer's, for a publisher confirm) does it, sharing the
// fsync of the root directory with the other queues created meanwhile.
func (s *Store) messagesLogLocked() (*replica.Local, error) {
	if l := s.messages.Load(); l != nil {
		return l, nil
	}
	if s.ended {
		return nil, replica.ErrClosed
	}
	if err := os.Mkdir(s.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	l, err := s.root.openLog(filepath.Join(s.dir, MessagesLog), s.logger)
	if err != nil {
		return nil, err
	}
	s.dirChange = s.root.dir.changed()
	s.newDir.Store(true)
	s.messages.Store(l)
	return l, nil
}

// settledLog returns the settlement log, creating it on first use (the
// queue's directory exists: something was logged before anything can be
// settled). Caller holds mu.
func (s *Store) settledLog() (*replica.Local, error) {
	if s.settled != nil {
		return s.settled, nil
	}
	l, err := s.root.openLog(filepath.Join(s.dir, SettlementLog), s.logger)
	if err != nil {
		return nil, err
	}
	s.settled = l
	return l, nil
}

// Unsettled calls fn, right after Open, for every logged message not
// settled, in log order: its offset, whether it was (or may have been)
// delivered before the restart, and its delivery count (the returns of a
// quorum queue's message). Recovery applies exactly these to the queue.
func (s *Store) Unsettled(fn func(off int64, redelivered bool, returns uint32)) {
	l := s.messages.Load()
	if l == nil {
		return
	}
	for off, end := s.win.base, l.EndOffset(); off < end; off++ {
		if !s.win.isSettled(off) {
			fn(off, s.recovered.redelivered(off), s.counts[off])
		}
	}
}

// AppendLocked logs one message batch (built by EncodeMessage), after the
// messages held back before it, and returns its offset; the first append
// creates the messages log. It does not wait for fsync; Sync does that
// for confirms. The batch is copied, not changed, so it may be appended to
// several logs. Caller holds the queue's lock.
func (s *Store) AppendLocked(batch []byte) (int64, error) {
	off, err := s.BufferLocked(batch)
	if err != nil {
		return 0, err
	}
	if err := s.writeUnwrittenLocked(); err != nil {
		// The caller fails the publish: the batch must not reach the
		// log with a later write. Those held back before it stay, for
		// their messages are in the queue.
		*s.unwritten = (*s.unwritten)[:len(*s.unwritten)-len(batch)]
		s.unwrittenCount--
		if s.unwrittenCount == 0 {
			s.dropUnwrittenLocked()
		}
		return 0, err
	}
	return off, nil
}

// maxUnwrittenBytes bounds the messages a queue holds back from its log:
// past it, BufferLocked writes them before taking another.
const maxUnwrittenBytes = 256 << 10

// unwrittenPool holds the buffers of queues' unwritten messages: a queue
// keeps one only while it has messages to write, so idle queues cost none.
var unwrittenPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// BufferLocked gives a message batch (built by EncodeMessage) its offset
// in the messages log and holds it back, copied, to be written with the
// queue's other unwritten messages in one append: by Sync before its
// fsync, before the log is read (ReadLocked) or settlements are written
// (Housekeep), at close, or here once maxUnwrittenBytes are held. The
// offset is exact because only this queue, under its lock, appends to its
// messages log, and a failed write keeps the batches for the next:
// offsets are consecutive in the order messages were buffered. Caller
// holds the queue's lock.
func (s *Store) BufferLocked(batch []byte) (int64, error) {
	l, err := s.messagesLogLocked()
	if err != nil {
		return 0, err
	}
	if s.unwritten != nil && len(*s.unwritten)+len(batch) > maxUnwrittenBytes {
		if err := s.writeUnwrittenLocked(); err != nil {
			return 0, err
		}
	}
	if s.unwritten == nil {
		s.unwritten = unwrittenPool.Get().(*[]byte)
	}
	off := l.EndOffset() + s.unwrittenCount
	*s.unwritten = append(*s.unwritten, batch...)
	s.unwrittenCount++
	return off, nil
}

// writeUnwrittenLocked appends the held-back messages to the messages log
// as one write. On failure they stay held back, to be retried. Caller
// holds the queue's lock.
func (s *Store) writeUnwrittenLocked() error {
	if s.unwritten == nil {
		return nil
	}
	l := s.messages.Load() // not nil: BufferLocked created it
	if _, err := l.Append(*s.unwritten, replica.AppendOptions{}); err != nil {
		return err
	}
	s.dropUnwrittenLocked()
	return nil
}

// dropUnwrittenLocked forgets the held-back messages (written, or the
// queue deleted). Caller holds the queue's lock.
func (s *Store) dropUnwrittenLocked() {
	if s.unwritten == nil {
		return
	}
	b := s.unwritten
	s.unwritten, s.unwrittenCount = nil, 0
	if cap(*b) <= maxUnwrittenBytes+64<<10 {
		*b = (*b)[:0]
		unwrittenPool.Put(b)
	}
}

// writeUnwritten is writeUnwrittenLocked taking the queue's lock. It
// reports ended, writing nothing, for a store that ended meanwhile: its
// close wrote what was held back, or failed to, or the queue is gone.
func (s *Store) writeUnwritten() (ended bool, err error) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.ended {
		return true, nil
	}
	return false, s.writeUnwrittenLocked()
}

// ReadLocked calls fn for each message from offset on, with its offset
// and enqueue time (unix ms), as far as maxBytes of batches reach (at
// least one message), until fn returns false. It writes the messages held
// back first: they may be among those asked for. Caller holds the queue's
// lock. A failure that means the log is damaged satisfies IsDamage.
func (s *Store) ReadLocked(offset, maxBytes int64, fn func(off, ts int64, m Message) bool) error {
	if err := s.writeUnwrittenLocked(); err != nil {
		return err
	}
	return s.read(offset, maxBytes, fn)
}

// read is ReadLocked without writing what is held back.
func (s *Store) read(offset, maxBytes int64, fn func(off, ts int64, m Message) bool) error {
	l := s.messages.Load()
	if l == nil {
		return fmt.Errorf("no message at offset %d: nothing logged", offset)
	}
	sl, err := l.Read(offset, maxBytes)
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
			if !fn(off, h.BaseTimestamp+r.TimestampDelta, DecodeMessage(r)) {
				return nil
			}
		}
		data = data[h.Size():]
	}
	return nil
}

// scanBytes is how much of the messages log one step of Scan reads.
const scanBytes = 1 << 20

// Scan calls fn for every message from offset to the end of the log, until
// fn returns false: recovery reads the messages of a queue that needs
// each one's priority, size or enqueue time.
func (s *Store) Scan(offset int64, fn func(off, ts int64, m Message) bool) error {
	l := s.messages.Load()
	if l == nil {
		return nil
	}
	for offset < l.EndOffset() {
		next, more := offset, true
		err := s.read(offset, scanBytes, func(off, ts int64, m Message) bool {
			more = fn(off, ts, m)
			next = off + 1
			return more
		})
		if err != nil || !more {
			return err
		}
		if next == offset {
			return fmt.Errorf("no message at offset %d below end %d", offset, l.EndOffset())
		}
		offset = next
	}
	return nil
}

// endLocked marks the store closed (or deleted) for good: no log is
// created after it. Caller holds mu.
func (s *Store) endLocked() {
	s.closed = true
	s.qmu.Lock()
	defer s.qmu.Unlock()
	s.ended = true
}

// logs returns the logs that exist; the settlement log may be nil.
// Caller holds mu, after endLocked (or before anything is shared).
func (s *Store) logs() (messages, settled *replica.Local) {
	return s.messages.Load(), s.settled
}

// CloseWithoutMarker closes the logs of a store given up on (its queue
// crashed, or could not be recovered) without vouching for anything: no
// clean-shutdown marker, and confirms still waiting fail. The files stay,
// for a repair or Delete.
func (s *Store) CloseWithoutMarker() {
	s.root.remove(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.endLocked()
	messages, settled := s.logs()
	if messages != nil {
		messages.Close()
	}
	if settled != nil {
		settled.Close()
	}
}

// Sync writes the messages held back (BufferLocked) and fsyncs the
// messages log (after, the first time, the directories made when it was
// created): once it returns nil, every message appended or buffered
// before the call is durable. The Syncer calls it for publisher confirms.
// It fails closed: a store that ended meanwhile counts as synced only if
// it was deleted (RabbitMQ confirms a message whose queue was deleted) or
// its close made every logged message durable.
func (s *Store) Sync() error {
	l := s.messages.Load()
	if l == nil {
		return nil // nothing logged, nothing to make durable
	}
	ended, err := s.writeUnwritten()
	if ended {
		return s.endedSync()
	}
	end := l.EndOffset()
	if err == nil {
		err = s.syncNewDir()
	}
	if err == nil {
		err = l.Sync()
	}
	switch {
	case err == nil:
		s.advanceSynced(end)
		return nil
	case errors.Is(err, replica.ErrClosed):
		return s.endedSync() // closed under us
	}
	return err
}

// errStoreClosed fails a confirm whose messages a closing store did not
// make durable.
var errStoreClosed = errors.New("queuestore: queue store closed before its messages were made durable")

// endedSync is Sync's answer for a store that ended: it waits for the
// close or delete to finish and reports its fate.
func (s *Store) endedSync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fate == closedDurable || s.fate == deleted {
		return nil
	}
	return errStoreClosed
}

// close writes what was held back and the pending settlements, closes
// both logs (which fsyncs them) and writes the clean-shutdown marker. A
// store that never logged a message has no files and leaves none.
func (s *Store) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.endLocked()
	s.qmu.Lock()
	written := s.writeUnwrittenLocked()
	pending, counts, delivered := s.pending, s.pendingCounts, s.delivered
	s.pending, s.pendingCounts = nil, nil
	s.qmu.Unlock()
	if s.messages.Load() == nil {
		s.fate = closedDurable
		return nil
	}
	var errs []error
	if written == nil { // otherwise settlements may name messages not in the log
		if len(pending) > 0 {
			errs = append(errs, s.writeSettled(rangesOf(pending)))
		}
		if len(counts) > 0 {
			errs = append(errs, s.writeCounts(counts))
		}
	}
	messages, settled := s.logs() // the settlement log may have been created just now
	closed := messages.Close()
	if settled != nil {
		errs = append(errs, settled.Close())
	}
	// A queue created by this process and never confirmed to has its
	// directory entries made durable here, as a confirm would.
	dirs := s.syncNewDir()
	if written == nil && closed == nil && dirs == nil {
		s.fate = closedDurable
	}
	if err := errors.Join(append(errs, written, closed, dirs)...); err != nil {
		return err
	}
	return writeCleanMarker(s.dir, delivered)
}

// Delete closes the logs and removes the queue's directory, for a deleted
// queue; that of a crashed queue, whose store is closed already, too.
func (s *Store) Delete() error {
	s.root.remove(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fate == deleted {
		return nil
	}
	var errs []error
	if !s.closed {
		s.endLocked()
		s.qmu.Lock()
		s.dropUnwrittenLocked()
		s.qmu.Unlock()
		messages, settled := s.logs()
		if messages != nil {
			errs = append(errs, messages.Delete())
		}
		if settled != nil {
			errs = append(errs, settled.Delete())
		}
	}
	s.fate = deleted
	return errors.Join(append(errs, os.RemoveAll(s.dir))...)
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// DeliveredLocked records that the message at off was handed to a
// consumer: after a clean restart the messages up to the highest such
// offset come back marked redelivered. Caller holds the queue's lock.
func (s *Store) DeliveredLocked(off int64) {
	s.delivered = max(s.delivered, off)
}

// Extent says how far a store's messages log reaches.
type Extent struct {
	Start  int64 // the first offset it holds: settled segments below it are gone
	End    int64 // the offset the next written message gets (held-back ones not counted)
	Synced int64 // every offset below it is fsynced
}

// Extent returns how far the messages log reaches now (all 0 before it
// exists).
func (s *Store) Extent() Extent {
	l := s.messages.Load()
	if l == nil {
		return Extent{}
	}
	return Extent{Start: l.StartOffset(), End: l.EndOffset(), Synced: s.syncedEnd.Load()}
}

func (s *Store) advanceSynced(end int64) {
	for {
		cur := s.syncedEnd.Load()
		if end <= cur || s.syncedEnd.CompareAndSwap(cur, end) {
			return
		}
	}
}
