package jetstream

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// stream is one stream: its log, and in memory what its log implies (the
// live messages by subject, counts and sizes, the duplicate window) plus
// its consumers. One mutex guards the stream and all its consumers' state,
// so that publishes, acknowledgements and deliveries see one order; no
// I/O but an append, and the occasional read of the log's head, happens
// under it.
//
// Which messages are live: every message in the log from first to last
// whose sequence the subject index holds. A message leaves the stream by
// a limit (count, bytes, age, per subject), a roll-up, a purge, a delete
// or an acknowledgement (work queue and interest retention); it stays in
// the log (Kafka consumers still read it) until the head of the stream
// passes it and the log start follows.
type stream struct {
	svc     *Service
	name    string
	id      string // this incarnation's, keying its state records
	created time.Time
	log     StreamLog

	mu        sync.Mutex
	cfg       StreamConfig
	first     uint64 // no live message below (last+1 when empty); advanced lazily
	last      uint64 // the last sequence stored
	lastTime  time.Time
	msgs      uint64
	bytes     uint64
	subjects  subjectIndex
	dedupe    dedupeWindow
	lastMsgID string
	head      cursor // reads the log at first, to find the oldest live message
	// explicit are the deletions no replay of the log re-derives
	// (deletes, filtered purges, acknowledgements under work queue and
	// interest retention), ascending, at or above first; they are
	// persisted in the state log (stream_state.go).
	explicit   []uint64
	stateDirty bool  // explicit or first changed since the state was written
	logStart   int64 // the log start the stream last moved the log to
	consumers  map[string]*consumer
	deleted    bool
}

func newStream(svc *Service, def streamDef, log StreamLog) *stream {
	s := &stream{
		svc:       svc,
		name:      def.Config.Name,
		id:        def.ID,
		created:   def.Created,
		log:       log,
		cfg:       def.Config,
		first:     1,
		subjects:  subjectIndex{},
		consumers: map[string]*consumer{},
	}
	s.head = cursor{log: log, name: s.name}
	return s
}

// rebuild reads the log and replays it into the stream's state: every
// record indexed in order, limits and roll-ups applied as they were when
// it was published, the persisted explicit deletions and head applied.
func (s *stream) rebuild(state streamState, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := seqOf(s.log.StartOffset())
	s.first = max(start, state.First, 1)
	s.last = s.first - 1
	s.logStart = s.log.StartOffset()
	s.explicit = slices.DeleteFunc(slices.Clone(state.Deleted), func(seq uint64) bool { return seq < s.first })
	if err := s.catchUpLocked(now); err != nil {
		return err
	}
	if state.First > s.last+1 { // the log was cut below what the state says was stored
		s.last = state.First - 1
	}
	return nil
}

// catchUpLocked indexes what the log holds past the last sequence
// indexed: at open, everything; later, records Kafka producers appended
// to the stream's topic, which become messages of the stream like
// published ones (without de-duplication checks). It also follows a log
// start moved by Kafka's DeleteRecords.
func (s *stream) catchUpLocked(now time.Time) error {
	if start := seqOf(s.log.StartOffset()); start > s.first {
		s.removeBelowLocked(start)
	}
	return s.indexLogLocked(seqOf(s.log.EndOffset()), now)
}

// indexLogLocked replays the log's records from last+1 up to end into
// the stream, as their publishes did: stored, then limits and roll-ups
// applied. Records deleted explicitly are skipped.
func (s *stream) indexLogLocked(end uint64, now time.Time) error {
	c := cursor{log: s.log, name: s.name}
	for s.last+1 < end {
		m, err := c.at(s.last + 1)
		if err != nil {
			return fmt.Errorf("jetstream: stream %s: read the log at sequence %d: %w", s.name, s.last+1, err)
		}
		if m == nil || m.Seq >= end {
			break
		}
		if s.deletedExplicitly(m.Seq) {
			s.last = m.Seq
			continue
		}
		s.storeLocked(m, headerValue(m.Header, hdrMsgID), now)
		s.applyLimitsLocked(m, headerValue(m.Header, hdrRollup))
	}
	s.last = max(s.last, end-1) // control records or compacted gaps at the end
	if s.msgs == 0 {
		s.first = s.last + 1
	}
	return nil
}

func (s *stream) deletedExplicitly(seq uint64) bool {
	_, found := slices.BinarySearch(s.explicit, seq)
	return found
}

// storeLocked adds a message just written (or replayed) to the index, the
// duplicate window and the counts, and tells the consumers.
func (s *stream) storeLocked(m *Message, msgID string, now time.Time) {
	size := m.size()
	s.subjects.add(m.Subject, m.Seq, size)
	s.msgs++
	s.bytes += size
	s.last = m.Seq
	s.lastTime = m.Time
	s.lastMsgID = msgID
	if msgID != "" && now.Sub(m.Time) < s.cfg.Duplicates {
		s.dedupe.add(msgID, m.Seq, m.Time)
	}
	if s.msgs == 1 {
		s.first = m.Seq
	}
	for _, c := range s.consumers {
		c.noteStoredLocked(m)
	}
}

// applyLimitsLocked removes what the message m just stored pushes out: by
// its roll-up header, the per-subject limit, and with discard old the
// stream's count and size limits. These removals follow from the log, so
// a replay derives them again and they are not persisted.
func (s *stream) applyLimitsLocked(m *Message, rollup string) {
	switch rollup {
	case rollupSubject:
		if e := s.subjects[m.Subject]; e != nil {
			for _, seq := range slices.Clone(e.seqs) {
				if seq < m.Seq {
					s.removeLocked(seq, m.Subject, false)
				}
			}
		}
	case rollupAll:
		for _, subj := range s.subjects.sorted() {
			for _, seq := range slices.Clone(s.subjects[subj].seqs) {
				if seq < m.Seq {
					s.removeLocked(seq, subj, false)
				}
			}
		}
	}
	if limit := s.cfg.MaxMsgsPer; limit > 0 {
		for e := s.subjects[m.Subject]; e != nil && int64(len(e.seqs)) > limit; e = s.subjects[m.Subject] {
			s.removeLocked(e.seqs[0], m.Subject, false)
		}
	}
	for s.cfg.MaxMsgs > 0 && s.msgs > uint64(s.cfg.MaxMsgs) || s.cfg.MaxBytes > 0 && s.bytes > uint64(s.cfg.MaxBytes) {
		if !s.removeOldestLocked() {
			break
		}
	}
}

// removeLocked takes a live message out of the stream; explicit marks a
// removal a replay would not derive, to be persisted. It reports whether
// the message was live.
func (s *stream) removeLocked(seq uint64, subject string, explicit bool) bool {
	size, ok := s.subjects.remove(subject, seq)
	if !ok {
		return false
	}
	s.msgs--
	s.bytes -= size
	if explicit {
		if i, found := slices.BinarySearch(s.explicit, seq); !found {
			s.explicit = slices.Insert(s.explicit, i, seq)
		}
		s.stateDirty = true
	}
	if s.msgs == 0 {
		s.first = s.last + 1
		s.stateDirty = true
	}
	for _, c := range s.consumers {
		c.noteRemovedLocked(seq, subject)
	}
	return true
}

// oldestLocked returns the oldest live message, moving first up to it;
// nil when the stream is empty.
func (s *stream) oldestLocked() (*Message, error) {
	for s.msgs > 0 && s.first <= s.last {
		m, err := s.head.at(s.first)
		if err != nil {
			return nil, err
		}
		if m == nil { // the log lost the rest (cut under us): nothing to find
			return nil, nil
		}
		if m.Seq > s.first {
			s.first = m.Seq
		}
		if s.subjects.has(m.Subject, m.Seq) {
			s.pruneExplicitLocked()
			return m, nil
		}
		s.first++
	}
	return nil, nil
}

// removeOldestLocked removes the oldest live message (discard old).
func (s *stream) removeOldestLocked() bool {
	m, err := s.oldestLocked()
	if err != nil {
		s.svc.log.Error("jetstream: read the head of a stream", "stream", s.name, "err", err)
		return false
	}
	if m == nil {
		return false
	}
	s.removeLocked(m.Seq, m.Subject, false)
	s.first = m.Seq + 1
	s.stateDirty = true
	return true
}

// removeBelowLocked removes every live message below seq (the log start
// moved there, or a purge).
func (s *stream) removeBelowLocked(seq uint64) {
	for _, subj := range s.subjects.sorted() {
		for e := s.subjects[subj]; e != nil && e.seqs[0] < seq; e = s.subjects[subj] {
			s.removeLocked(e.seqs[0], subj, false)
		}
	}
	if s.first < seq {
		s.first = min(seq, s.last+1)
		s.stateDirty = true
	}
	s.pruneExplicitLocked()
}

// pruneExplicitLocked forgets explicit deletions below first: the head
// (persisted) covers them.
func (s *stream) pruneExplicitLocked() {
	i, _ := slices.BinarySearch(s.explicit, s.first)
	if i > 0 {
		s.explicit = slices.Delete(s.explicit, 0, i)
		s.stateDirty = true
	}
}

// expireLocked removes the messages older than max_age.
func (s *stream) expireLocked(now time.Time) {
	if s.cfg.MaxAge <= 0 {
		return
	}
	cutoff := now.Add(-s.cfg.MaxAge)
	for {
		m, err := s.oldestLocked()
		if err != nil {
			s.svc.log.Error("jetstream: read the head of a stream", "stream", s.name, "err", err)
			return
		}
		if m == nil || !m.Time.Before(cutoff) {
			return
		}
		s.removeLocked(m.Seq, m.Subject, false)
		s.first = m.Seq + 1
		s.stateDirty = true
	}
}

// trimLogLocked moves the log start up to the stream's head, so that what
// left the stream leaves the log (and Kafka consumers) and its disk space
// can go. It costs an fsync of the log's start offset, so housekeeping
// calls it, not every removal.
func (s *stream) trimLogLocked() {
	if _, err := s.oldestLocked(); err != nil {
		return
	}
	start := min(offsetOf(s.first), s.log.EndOffset())
	if start <= s.logStart {
		return
	}
	if err := s.log.DeleteBefore(start); err != nil {
		s.svc.log.Error("jetstream: move the log start of a stream", "stream", s.name, "offset", start, "err", err)
		return
	}
	s.logStart = start
	s.head.reset()
}

// Roll-up header values.
const (
	rollupSubject = "sub"
	rollupAll     = "all"
)
