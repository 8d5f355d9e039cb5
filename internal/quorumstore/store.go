package quorumstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/queuestore"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Store is a member node's replica of one quorum queue's log of commands
// (see the package doc). Methods named ...Locked are called by the queue
// that is served here, under its lock; they only buffer, and never wait.
type Store struct {
	log    *replica.RaftLog
	logger *slog.Logger

	mu sync.Mutex
	// pending holds the record batches not yet proposed, in queue order,
	// and open the records not yet closed into a batch (they follow
	// pending's batches), the first of them at openAt (unix ms). Messages
	// and commands share a batch: each batch is an entry of the group's
	// log, and a few large entries cost the members less than many small
	// ones.
	pending []byte
	open    record.Builder
	openAt  int64
	// end is the offset after the last record handed to the store in the
	// term served: what the next record gets once proposed.
	end int64
	// handedOut is the offset after the last command a handout waits
	// for (HandoutLocked): a deliver command, or the settle right after
	// it of a message handed out without acks; delivered is the message
	// that deliver command names.
	handedOut, delivered int64
	// term is the service of the term served (or of the last one).
	term *service
	// failed is closed when a proposal of the term served was refused
	// (term.failure says why).
	failed chan struct{}
	// truncatedAt is the offset of the last truncate proposed here
	// (truncate.go).
	truncatedAt int64
	// unsettled and forwards are what the last Replay found.
	unsettled []unsettledMessage
	forwards  []Forward
	// kept are the forwards whose messages the log holds, in log order
	// (from Replay, then as they come), and lastForward the id of the
	// last forwarded message handed to the store: TruncateLocked keeps a
	// young forward's messages in the log, so that a new leader knows
	// them.
	kept        []keptForward
	lastForward uint64

	wake          chan struct{} // one token: something is pending
	stop          chan struct{} // closed by Close
	closeOnce     sync.Once
	done          chan struct{} // the flusher ended
	truncatorDone chan struct{}
}

// ForwardedAs names a message of a publish another node forwarded: the
// forwarding node's id for the publish (0: not forwarded) and the
// message's index among the publish's messages. Each such message's
// record carries it, so that a new leader takes of a repeat of the
// publish only the messages the log does not hold, however the first
// attempt's records were split over the group's entries (Forward).
type ForwardedAs struct {
	ID    uint64
	Index int
}

// Forward is what the log holds of a forwarded publish (Replay): the
// forwarding node's id for it, when the leader took the last of its
// messages the log holds (unix ms), and which of them it holds.
type Forward struct {
	ID uint64
	At int64
	// off is the offset of its first message in the log.
	off int64
	// held are the indexes of its messages in the log, as [from, to)
	// runs in log order: one run, unless attempts of it were cut short.
	held [][2]int
}

// Holds reports whether the log holds the forward's message index.
func (f Forward) Holds(index int) bool {
	for _, r := range f.held {
		if index >= r[0] && index < r[1] {
			return true
		}
	}
	return false
}

// add notes message index, taken at at (unix ms).
func (f *Forward) add(index int, at int64) {
	f.At = max(f.At, at)
	if n := len(f.held); n > 0 && f.held[n-1][1] == index {
		f.held[n-1][1]++
		return
	}
	f.held = append(f.held, [2]int{index, index + 1})
}

// keptForward is a forward the log holds: the offset of its first
// message there, and when the leader took it (unix ms).
type keptForward struct{ off, at int64 }

// unsettledMessage is a message of the queue as Replay rebuilt it.
type unsettledMessage struct {
	off         int64
	redelivered bool
	returns     uint32
}

// service is what the store was handed in one term of serving the queue,
// as a publisher confirm's replica.Target: its Sync returns once all of
// it is committed, or fails if any of it will not be. A confirm waits on
// the service its message went to (TargetLocked), so one that a later
// term's service would cover wrongly never reaches it.
type service struct {
	s *Store
	// Guarded by s.mu: the commit of the last proposal (it covers every
	// one before, in the same term), and why a proposal was refused or
	// records were dropped unproposed (for good).
	lastCommit replica.Commit
	failure    error
	// proposed is the offset after the last record proposed, and
	// proposals the commits of the proposals not yet known committed, in
	// order (a handout waits on the one covering it).
	proposed  int64
	proposals []proposal
}

// proposal is one append of a term: the offset after its last record,
// and its commit.
type proposal struct {
	end    int64
	commit replica.Commit
}

// errSuperseded fails a service whose last records were never proposed:
// the queue stopped being served here first.
var errSuperseded = errors.New("quorumstore: the queue stopped being served here before these messages were proposed")

// Sync proposes what is pending, if s is the current service, and waits
// until everything handed to it is committed: a majority of the members
// has it fsynced.
func (sv *service) Sync() error {
	st := sv.s
	st.mu.Lock()
	if sv == st.term {
		st.flushLocked()
	}
	commit, err := sv.lastCommit, sv.failure
	st.mu.Unlock()
	if err != nil {
		return err
	}
	return waitCommit(commit)
}

// waitCommit waits for c, up to syncWait.
func waitCommit(c replica.Commit) error {
	ctx, cancel := context.WithTimeout(context.Background(), syncWait)
	defer cancel()
	return c.Wait(ctx)
}

// Open makes a store of the log (this node's replica of the queue's
// group) and starts its flusher; Close or Delete stops it.
func Open(log *replica.RaftLog, logger *slog.Logger) *Store {
	s := &Store{log: log, logger: logger, failed: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.term = &service{s: s}
	s.truncatorDone = make(chan struct{})
	go s.flusher()
	go s.truncator()
	return s
}

// Leadership is the group as this replica sees it: the leader (0 for
// none), the term, and whether this replica leads it and takes appends.
func (s *Store) Leadership() (leader, term uint64, leading bool) { return s.log.Leadership() }

// Changed is closed at the next change of the replica's Raft state or
// high watermark.
func (s *Store) Changed() <-chan struct{} { return s.log.Changed() }

// LogStart is the first offset this replica's log holds: what truncation
// left.
func (s *Store) LogStart() int64 { return s.log.StartOffset() }

// HighWatermark is the offset after the last record committed here.
func (s *Store) HighWatermark() int64 { return s.log.HighWatermark() }

// Failed is closed once a proposal of the term served was refused (see
// the package doc): the queue must stop serving and Replay again.
func (s *Store) Failed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// Done is closed once the store is closed or deleted.
func (s *Store) Done() <-chan struct{} { return s.stop }

// flusher proposes what is pending whenever something was added, until
// Close.
func (s *Store) flusher() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		s.flushLocked()
		s.mu.Unlock()
	}
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// addRecordLocked adds r, of time ts (unix ms), to the open batch; it
// takes the next offset. Caller holds mu.
func (s *Store) addRecordLocked(r record.Record, ts int64) {
	if s.open.Len() == 0 {
		s.openAt = ts
	}
	r.TimestampDelta = ts - s.openAt
	s.open.Append(r)
	s.end++
	if s.open.Size() >= maxBatchBytes {
		s.closeBatchLocked()
	}
}

// addCommandLocked adds a command record, of now, to the open batch.
// Caller holds mu.
func (s *Store) addCommandLocked(r record.Record) { s.addRecordLocked(r, time.Now().UnixMilli()) }

// maxBatchBytes is the size past which the open batch is closed before
// the next flush: a bound on the entries of the group's log (a single
// larger message makes a larger one).
const maxBatchBytes = 1 << 20

// closeBatchLocked turns the open records into a batch at the end of
// pending. Caller holds mu.
func (s *Store) closeBatchLocked() {
	if s.open.Len() == 0 {
		return
	}
	s.pending = append(s.pending, s.open.Build(s.openAt)...)
	s.open.Reset()
}

// dropPendingLocked forgets what was not proposed. Caller holds mu.
func (s *Store) dropPendingLocked() {
	s.pending = nil
	s.open.Reset()
}

// flushLocked proposes everything pending in one append. A refused
// proposal fails the term served (Failed). Caller holds mu.
func (s *Store) flushLocked() error {
	if s.term.failure != nil {
		s.dropPendingLocked()
		return s.term.failure
	}
	s.closeBatchLocked()
	if len(s.pending) == 0 {
		return nil
	}
	batches := s.pending
	a, err := s.log.Append(batches, replica.AppendOptions{AckCommitted: true})
	// Append copied the batches (Raft keeps the entries): the buffer takes
	// the next flush's, rather than growing again from nothing.
	s.pending = nil
	if cap(batches) <= maxReusedPending {
		s.pending = batches[:0]
	}
	if err == nil && a.LastOffset+1 != s.end {
		err = fmt.Errorf("quorumstore: proposal took offsets up to %d, the queue counted %d", a.LastOffset+1, s.end)
	}
	if err != nil {
		s.term.failure = err
		close(s.failed)
		s.logger.Warn("quorumstore: a proposal of the queue's commands was refused; the queue stops serving here", "err", err)
		return err
	}
	sv := s.term
	sv.lastCommit = a.Commit
	hw := s.log.HighWatermark() // this replica leads the term: what is below is its own, committed
	for len(sv.proposals) > 0 && sv.proposals[0].end <= hw {
		sv.proposals = sv.proposals[1:]
	}
	sv.proposed = s.end
	sv.proposals = append(sv.proposals, proposal{end: s.end, commit: a.Commit})
	return nil
}

// maxReusedPending bounds the buffer of pending batches kept from one
// flush to the next.
const maxReusedPending = 4 << 20

// addMessageLocked buffers the enqueue of m at at (unix ms), tagged
// with fw if it was forwarded, and returns its offset. Caller holds mu.
func (s *Store) addMessageLocked(m queuestore.Message, at int64, fw ForwardedAs) (int64, error) {
	if s.term.failure != nil {
		return 0, s.term.failure
	}
	off := s.end
	r := queuestore.MessageRecord(m)
	if fw.ID != 0 {
		now := time.Now().UnixMilli()
		r.Headers = append(r.Headers, forwardedTag(fw, now))
		if fw.ID != s.lastForward {
			s.kept = append(s.kept, keptForward{off: off, at: now})
			s.lastForward = fw.ID
		}
	}
	s.addRecordLocked(r, at)
	return off, nil
}

// addCommand buffers a command record for the flusher, and then calls
// added (if set) with mu held.
func (s *Store) addCommand(r record.Record, added func()) {
	s.mu.Lock()
	if s.term.failure == nil {
		s.addCommandLocked(r)
		if added != nil {
			added()
		}
	}
	s.mu.Unlock()
	s.signal()
}

// BufferLocked gives the enqueue of m at at (unix ms: its enqueue time)
// its offset and buffers it; the next flush proposes it. fw names it if
// it is a message of a forwarded publish (the zero ForwardedAs if not).
func (s *Store) BufferLocked(m queuestore.Message, at int64, fw ForwardedAs) (int64, error) {
	s.mu.Lock()
	off, err := s.addMessageLocked(m, at, fw)
	s.mu.Unlock()
	s.signal()
	return off, err
}

// AppendLocked is BufferLocked proposing at once.
func (s *Store) AppendLocked(m queuestore.Message, at int64, fw ForwardedAs) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, err := s.addMessageLocked(m, at, fw)
	if err == nil {
		err = s.flushLocked()
	}
	return off, err
}

// DeliveredLocked logs a deliver command.
func (s *Store) DeliveredLocked(off int64) {
	s.addCommand(deliverCommand(off), func() { s.handedOut, s.delivered = s.end, off })
}

// SettleLocked logs a settle command; one that follows the deliver
// command of its message at once settles a message handed out without
// acks, which a handout waits for too.
func (s *Store) SettleLocked(off int64) {
	s.addCommand(settleCommand(off), func() {
		if s.handedOut == s.end-1 && s.delivered == off {
			s.handedOut = s.end
		}
	})
}

// NoteReturnLocked logs a return command: the message at off was
// returned n times in all.
func (s *Store) NoteReturnLocked(off int64, n uint32) { s.addCommand(returnCommand(off, n), nil) }

// HandoutLocked is what a message handed out just now (DeliveredLocked,
// and SettleLocked for one without acks) waits on before it leaves the
// node: the commit of every deliver command handed to the store so far
// (and of the settles of messages handed out without acks). A message
// is never in a client's hands before its deliver command is committed,
// so a new leader always knows it was delivered (RabbitMQ's quorum queue
// commits a checkout before it sends the message). The records handed
// to the store after the last such command (enqueues, acks' settles) are
// not waited for: the deliver commands were proposed as they came, and
// their commit, often under way already, is all a handout needs.
// Waiting proposes what is pending at once, so many handouts share one
// append.
func (s *Store) HandoutLocked() Handout {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Handout{sv: s.term, upTo: s.handedOut}
}

// Handout is the commit of a service's records below upTo
// (HandoutLocked). The zero Handout waits for nothing: a message of a
// queue that is not replicated.
type Handout struct {
	sv   *service
	upTo int64
}

// Sync waits until the records below h.upTo are committed, or fails if
// they will not be (the term's proposal was refused, the queue stopped
// being served here, or no quorum answered in syncWait).
func (h Handout) Sync() error {
	sv := h.sv
	if sv == nil {
		return nil
	}
	st := sv.s
	st.mu.Lock()
	if sv == st.term && sv.proposed < h.upTo {
		st.flushLocked()
	}
	commit, err := replica.Commit{}, sv.failure
	if err == nil && sv.proposed < h.upTo {
		err = errSuperseded // dropped unproposed by a Replay
	}
	for _, p := range sv.proposals {
		if p.end >= h.upTo {
			commit = p.commit
			break
		}
	}
	st.mu.Unlock()
	if err != nil {
		return err
	}
	return waitCommit(commit) // none left covering upTo: the last append found it committed
}

// Passed reports, without waiting, whether the replica's high watermark
// is past h's records. It does not tell whose records those are (after a
// change of leader they may be another term's): Sync does, at once then.
// Handouts of one service pass in the order they were made, so a
// consumer that waited for one (Sync) finds the next ones already
// committed with Passed, and checks only the last with Sync.
func (h Handout) Passed() bool {
	return h.sv == nil || h.upTo <= h.sv.s.log.HighWatermark()
}

// syncWait bounds how long a confirm waits for its commit: a group
// without a quorum must not hold up the confirms of every other queue
// (they share the syncer's rounds); the confirm is then a nack.
const syncWait = 10 * time.Second

// TargetLocked is what a publisher confirm of the message just handed to
// the store (BufferLocked, AppendLocked) waits on: the service of the
// term served. Caller holds the queue's lock, which keeps the term from
// changing (Replay runs only while the queue is not served).
func (s *Store) TargetLocked() replica.Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.term
}

// Sync waits for what the current service was handed (the store as a
// Target: confirms wait on TargetLocked's service instead).
func (s *Store) Sync() error {
	s.mu.Lock()
	sv := s.term
	s.mu.Unlock()
	return sv.Sync()
}

// Forwarded calls fn for each message of batches another node forwarded
// (enqueue batches, one message each): its batch, its
// enqueue time and the message.
func Forwarded(batches []byte, fn func(batch []byte, ts int64, m queuestore.Message) error) error {
	for len(batches) > 0 {
		h, err := record.ParseHeader(batches)
		if err != nil {
			return err
		}
		b := batches[:h.Size()]
		recs, err := record.Records(b)
		if err != nil {
			return err
		}
		if len(recs) != 1 || !isMessage(recs[0]) {
			return fmt.Errorf("quorumstore: a forwarded batch holds %d records, not one message", len(recs))
		}
		if err := fn(b, h.BaseTimestamp+recs[0].TimestampDelta, queuestore.DecodeMessage(recs[0])); err != nil {
			return err
		}
		batches = batches[h.Size():]
	}
	return nil
}

// readWait bounds how long a page-in waits for a message's enqueue to
// commit (a message is offered before that: see the package doc).
const readWait = 5 * time.Second

// ReadLocked calls fn for each message from off on, as far as maxBytes of
// batches reach, until fn returns false.
func (s *Store) ReadLocked(off, maxBytes int64, fn func(off, ts int64, m queuestore.Message) bool) error {
	s.mu.Lock()
	err := s.flushLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if off >= s.log.HighWatermark() {
		ctx, cancel := context.WithTimeout(context.Background(), readWait)
		err := s.log.WaitHighWatermark(ctx, off)
		cancel()
		if err != nil {
			return fmt.Errorf("quorumstore: message at offset %d not committed: %w", off, err)
		}
	}
	_, err = s.read(off, maxBytes, func(o, ts int64, r record.Record) bool {
		return !isMessage(r) || fn(o, ts, queuestore.DecodeMessage(r))
	})
	return err
}

// Scan calls fn for every message from off to the end of the committed
// log, until fn returns false.
func (s *Store) Scan(off int64, fn func(off, ts int64, m queuestore.Message) bool) error {
	return s.walk(off, func(o, ts int64, r record.Record) bool {
		return !isMessage(r) || fn(o, ts, queuestore.DecodeMessage(r))
	})
}

// scanBytes is how much of the log one read of a walk takes.
const scanBytes = 1 << 20

// walk calls fn for every record from off to the high watermark, until
// fn returns false.
func (s *Store) walk(off int64, fn func(off, ts int64, r record.Record) bool) error {
	return s.walkBatches(off, recordsFrom(off, fn))
}

// walkBatches calls fn for every batch from the one holding off to the
// high watermark, until fn returns false.
func (s *Store) walkBatches(off int64, fn func(h record.Header, batch []byte) (bool, error)) error {
	off = max(off, s.log.StartOffset())
	for off < s.log.HighWatermark() {
		next, err := s.readBatches(off, scanBytes, fn)
		if err != nil || next < 0 {
			return err
		}
		off = next
	}
	return nil
}

// read calls fn for the records of the batches from the one holding off,
// as far as maxBytes reach, skipping those below off. It returns the
// offset after the last batch read, or -1 if fn stopped it.
func (s *Store) read(off, maxBytes int64, fn func(off, ts int64, r record.Record) bool) (int64, error) {
	return s.readBatches(off, maxBytes, recordsFrom(off, fn))
}

// recordsFrom turns fn, called for each record from offset from on, into
// a batch visitor for readBatches.
func recordsFrom(from int64, fn func(off, ts int64, r record.Record) bool) func(record.Header, []byte) (bool, error) {
	return func(h record.Header, batch []byte) (bool, error) {
		recs, err := record.Records(batch)
		if err != nil {
			return false, err
		}
		for i, r := range recs {
			o := h.BaseOffset + int64(i)
			if o >= from && !fn(o, h.BaseTimestamp+r.TimestampDelta, r) {
				return false, nil
			}
		}
		return true, nil
	}
}

// readBatches calls fn for the batches from the one holding off, as far
// as maxBytes reach, until fn returns false (or an error). It returns the
// offset after the last batch read, or -1 if fn stopped it.
func (s *Store) readBatches(off, maxBytes int64, fn func(h record.Header, batch []byte) (bool, error)) (int64, error) {
	sl, err := s.log.Read(off, maxBytes)
	if err != nil {
		return 0, err
	}
	data, err := sl.Bytes()
	sl.Release()
	if err != nil {
		return 0, err
	}
	next := off
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil {
			return 0, err
		}
		more, err := fn(h, data[:h.Size()])
		switch {
		case err != nil:
			return 0, err
		case !more:
			return -1, nil
		}
		next = h.LastOffset() + 1
		data = data[h.Size():]
	}
	if next == off {
		return 0, fmt.Errorf("quorumstore: no record at offset %d below %d", off, s.log.HighWatermark())
	}
	return next, nil
}

// Replay rebuilds the queue from the committed log, on a replica that
// just became the leader, before the queue is served here: it waits until
// every entry of earlier terms is committed, computes the unsettled
// messages (Unsettled), logs the return of those a consumer held when
// the previous leader stopped, and starts the term's offsets where the
// log ends.
func (s *Store) Replay(ctx context.Context) error {
	if err := s.log.Commit(s.log.EndOffset()).Wait(ctx); err != nil {
		return err
	}
	type state struct {
		delivered, returned bool
		returns             uint32
	}
	live := make(map[int64]*state)
	var order []int64
	forwards := make(map[uint64]int) // index in logged, by id
	var logged []Forward
	var bad error
	err := s.walk(s.log.StartOffset(), func(off, ts int64, r record.Record) bool {
		if isMessage(r) {
			live[off] = &state{}
			order = append(order, off)
			if fw, at, ok := forwardedOf(r); ok {
				i, seen := forwards[fw.ID]
				if !seen {
					i = len(logged)
					forwards[fw.ID] = i
					logged = append(logged, Forward{ID: fw.ID, off: off})
				}
				logged[i].add(fw.Index, at)
			}
			return true
		}
		target, n, err := decodeCommand(r.Value)
		if err != nil {
			bad = fmt.Errorf("record at offset %d: %w", off, err)
			return false
		}
		m := live[target]
		switch {
		case m == nil: // settled already, or not a message
		case string(r.Key) == string(deliverKey):
			m.delivered = true
		case string(r.Key) == string(returnKey):
			m.delivered, m.returned, m.returns = false, true, n
		case string(r.Key) == string(settleKey):
			delete(live, target)
		}
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return fmt.Errorf("quorumstore: replay: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if (len(s.pending) > 0 || s.open.Len() > 0) && s.term.failure == nil {
		s.term.failure = errSuperseded
	}
	s.dropPendingLocked()
	s.end = s.log.EndOffset()
	s.handedOut = s.end // committed: Replay waited for it
	s.term = &service{s: s, proposed: s.end}
	s.failed = make(chan struct{})
	s.unsettled = s.unsettled[:0]
	s.forwards = logged
	s.kept, s.lastForward = s.kept[:0], 0
	for _, f := range logged {
		s.kept = append(s.kept, keptForward{off: f.off, at: f.At})
	}
	for _, off := range order {
		m := live[off]
		if m == nil {
			continue
		}
		if m.delivered { // its consumer was on the previous leader
			m.returns++
			s.addCommandLocked(returnCommand(off, m.returns))
		}
		s.unsettled = append(s.unsettled, unsettledMessage{off: off, redelivered: m.delivered || m.returned, returns: m.returns})
	}
	s.signal()
	return nil
}

// Unsettled calls fn for every message the last Replay found unsettled,
// in log order.
func (s *Store) Unsettled(fn func(off int64, redelivered bool, returns uint32)) {
	s.mu.Lock()
	ms := s.unsettled
	s.unsettled = nil
	s.mu.Unlock()
	for _, m := range ms {
		fn(m.off, m.redelivered, m.returns)
	}
}

// Forwards returns the forwarded publishes the last Replay found in the
// log (what truncation left of them), in the order their first messages
// have there.
func (s *Store) Forwards() []Forward {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := s.forwards
	s.forwards = nil
	return fs
}

// Close stops the flusher and closes this replica (the group goes on on
// the other members).
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
	<-s.truncatorDone
	return s.log.Close()
}

// CloseWithoutMarker is Close, for a queue given up on.
func (s *Store) CloseWithoutMarker() { s.Close() }

// Delete closes the replica and removes its files, for a deleted queue.
func (s *Store) Delete() error {
	err := s.Close()
	if derr := s.log.Delete(); err == nil {
		err = derr
	}
	return err
}

// Dir is the replica's directory.
func (s *Store) Dir() string { return s.log.Dir() }
