package jetstream

import (
	"container/heap"
	"slices"
	"time"
)

// AckKind is what a client's acknowledgement says of a delivery.
type AckKind int

const (
	AckAck      AckKind = iota // +ACK (or an empty body): done with it
	AckNak                     // -NAK: deliver it again, now or after a delay
	AckProgress                // +WPI: still working on it, restart its ack wait
	AckTerm                    // +TERM: never deliver it again
	AckUnknown                 // a body JetStream does not know: nothing changes, but it is answered
)

// Ack applies an acknowledgement sent to a delivery's reply subject
// (stream sequence sseq, consumer sequence dseq); delay is a -NAK's. An
// acknowledgement of something no longer pending is ignored. It reports
// whether a synchronous acknowledgement gets its (empty) answer: not when
// the consumer does not exist, nor for an ack or term of a sequence the
// consumer has not reached, as nats-server.
func (svc *Service) Ack(stream, consumer string, sseq, dseq uint64, kind AckKind, delay time.Duration) bool {
	s, _ := svc.stream(stream)
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.consumers[consumer]
	if c == nil {
		return false
	}
	if (kind == AckAck || kind == AckTerm) && sseq > c.cursor && len(c.lps) == 0 {
		return false
	}
	c.ackLocked(sseq, dseq, kind, delay, time.Now())
	return true
}

func (c *consumer) ackLocked(sseq, dseq uint64, kind AckKind, delay time.Duration, now time.Time) {
	if kind == AckUnknown || c.cfg.AckPolicy == AckNone || dseq <= c.floorC || dseq > c.dseq {
		return
	}
	switch kind {
	case AckAck, AckTerm:
		if kind == AckAck && c.cfg.AckPolicy == AckAll {
			for seq := range c.pending {
				if seq <= sseq {
					c.settleLocked(seq)
				}
			}
		} else if c.pending[sseq] != nil {
			c.settleLocked(sseq)
		}
		c.updateFloorLocked()
	case AckNak:
		p := c.pending[sseq]
		if p == nil {
			return
		}
		if delay > 0 {
			if i, found := slices.BinarySearch(c.redeliver, sseq); found {
				c.redeliver = slices.Delete(c.redeliver, i, i+1)
			}
			p.deadline = now.Add(delay)
			heap.Push(&c.timers, deadline{at: p.deadline, seq: sseq})
		} else {
			c.queueRedeliveryLocked(sseq)
		}
	case AckProgress:
		p := c.pending[sseq]
		if p == nil {
			return
		}
		p.deadline = now.Add(c.ackWait(max(c.rdc[sseq], 1)))
		heap.Push(&c.timers, deadline{at: p.deadline, seq: sseq})
	}
	c.lastActive = now
	c.dirty = true
	c.signal()
}

// settleLocked ends a pending delivery: acknowledged or terminated. Under
// work queue or interest retention the message may then leave the
// stream.
func (c *consumer) settleLocked(seq uint64) {
	p := c.pending[seq]
	delete(c.pending, seq)
	delete(c.rdc, seq)
	if i, found := slices.BinarySearch(c.redeliver, seq); found {
		c.redeliver = slices.Delete(c.redeliver, i, i+1)
	}
	if p.subject != "" {
		c.s.ackedLocked(c, seq, p.subject)
	}
}

// updateFloorLocked moves the ack floor up to just below the oldest
// pending delivery, or to the consumer's position when none is pending.
func (c *consumer) updateFloorLocked() {
	if len(c.pending) == 0 {
		floor := c.cursor
		if len(c.lps) > 0 {
			floor = c.lps[0] - 1
		}
		c.floorC, c.floorS = max(c.floorC, c.dseq), max(c.floorS, floor)
		return
	}
	oldest := uint64(0)
	for seq := range c.pending {
		if oldest == 0 || seq < oldest {
			oldest = seq
		}
	}
	c.floorC = max(c.floorC, c.pending[oldest].cseq-1)
	c.floorS = max(c.floorS, oldest-1)
}

// ackedLocked is told a consumer is done with a message (acknowledged,
// terminated, or delivered without acks): under work queue retention the
// message leaves the stream, under interest retention once no consumer
// needs it.
func (s *stream) ackedLocked(by *consumer, seq uint64, subject string) {
	switch s.cfg.Retention {
	case WorkQueuePolicy:
		s.removeLocked(seq, subject, true)
	case InterestPolicy:
		for _, c := range s.consumers {
			if c != by && c.needsLocked(seq, subject) {
				return
			}
		}
		s.removeLocked(seq, subject, true)
	}
}

// interestInLocked reports whether a consumer's filter takes m (interest
// retention drops a message nobody is interested in at once).
func (s *stream) interestInLocked(m *Message) bool {
	for _, c := range s.consumers {
		if c.filter.matches(m.Subject) {
			return true
		}
	}
	return false
}

// dropUninterestingLocked removes every message no consumer needs, after
// a consumer of an interest retention stream went away.
func (s *stream) dropUninterestingLocked() {
	for _, subj := range s.subjects.sorted() {
		e := s.subjects[subj]
		if e == nil {
			continue
		}
		for _, seq := range slices.Clone(e.seqs) {
			needed := false
			for _, c := range s.consumers {
				if c.needsLocked(seq, subj) {
					needed = true
					break
				}
			}
			if !needed {
				s.removeLocked(seq, subj, true)
			}
		}
	}
}
