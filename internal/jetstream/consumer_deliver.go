package jetstream

import (
	"container/heap"
	"slices"
	"strconv"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// Delivery. Each consumer has a goroutine that, woken by a new message, a
// pull request, an acknowledgement or a timer, delivers in rounds: under
// the stream's lock it decides what it must read (plan), reads the log
// without the lock (read), then under the lock again picks what goes out
// and records it as delivered (collect), and sends it without the lock.
// Redeliveries go first, then a last-per-subject consumer's starting
// messages, then new messages in stream order.

// maxReadsPerRound bounds the single messages (redeliveries, last per
// subject) one round reads.
const maxReadsPerRound = 64

// launch starts the delivery goroutine, sending through out; the caller
// holds the stream's lock.
func (c *consumer) launchLocked(out Outbox) {
	c.out = out
	go c.run()
}

// halt stops the delivery goroutine, if it runs, and waits for it. The
// consumer's state stays, to be written.
func (c *consumer) halt() {
	c.s.mu.Lock()
	running := c.out != nil && !c.halted
	c.halted = true
	c.s.mu.Unlock()
	if running {
		close(c.stop)
		<-c.done
	}
}

func (c *consumer) run() {
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := c.deliverRounds()
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), 0))
		}
		select {
		case <-c.stop:
			return
		case <-c.wake:
		case <-timer.C:
		}
	}
}

// deliverRounds delivers until nothing more can go out, and returns when
// it next has something to do (zero: only when woken).
func (c *consumer) deliverRounds() time.Time {
	for {
		now := time.Now()
		p, ok := c.plan(now)
		if !ok {
			return time.Time{}
		}
		c.read(&p)
		sends, next, more := c.collect(now, &p)
		for i := range sends {
			c.out.Send(sends[i].to, &sends[i].msg)
		}
		if !more {
			return next
		}
	}
}

// roundPlan is what a round reads and which interest it checks.
type roundPlan struct {
	seqs     []uint64 // single messages to read
	from     uint64   // read ahead from this sequence (0: no read)
	readEnd  uint64   // the log's end when read ahead (for an empty read)
	replies  []string // pull requests whose interest to check
	interest map[string]bool
	pushTo   string
}

// plan, under the lock, moves the deliveries whose ack deadline passed to
// the redelivery queue and lists what to read.
func (c *consumer) plan(now time.Time) (roundPlan, bool) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.halted {
		return roundPlan{}, false
	}
	c.expireLocked(now)
	var p roundPlan
	for _, seq := range c.redeliver {
		if len(p.seqs) == maxReadsPerRound {
			break
		}
		if c.fetched[seq] == nil && c.pending[seq] != nil {
			p.seqs = append(p.seqs, seq)
		}
	}
	for _, seq := range c.lps {
		if len(p.seqs) == maxReadsPerRound {
			break
		}
		if c.fetched[seq] == nil {
			p.seqs = append(p.seqs, seq)
		}
	}
	if len(c.fetched) > 4*maxReadsPerRound { // read for deliveries since acknowledged
		for seq := range c.fetched {
			if c.pending[seq] == nil && !slices.Contains(c.lps, seq) {
				delete(c.fetched, seq)
			}
		}
	}
	if c.wantsNewLocked() && len(c.ahead) == 0 && c.cursor < s.last {
		p.from = c.cursor + 1
		if c.filter.literal() { // jump over what the filter does not take
			if next := s.subjects.firstAfter(c.filter, c.cursor); next == 0 {
				c.cursor, p.from = s.last, 0
			} else {
				c.cursor, p.from = next-1, next
			}
		}
	}
	if c.cfg.push() {
		p.pushTo = c.cfg.DeliverSubject
	}
	for _, r := range c.waiting {
		p.replies = append(p.replies, r.reply)
	}
	return p, true
}

// wantsNewLocked reports whether a new message could go out now.
func (c *consumer) wantsNewLocked() bool {
	return !c.maxAckPendingReached() && (c.cfg.push() || len(c.waiting) > 0)
}

// read does a plan's reads and interest checks, without the lock.
func (c *consumer) read(p *roundPlan) {
	s := c.s
	for _, seq := range p.seqs {
		m, err := readMessage(s.log, s.name, seq)
		if err != nil {
			s.svc.log.Error("jetstream: read a message to deliver", "stream", s.name, "consumer", c.name, "seq", seq, "err", err)
			continue
		}
		if m == nil {
			m = &Message{Seq: seq} // gone from the log: collect drops it
		}
		c.fetched[seq] = m
	}
	if p.from > 0 {
		p.readEnd = seqOf(s.log.EndOffset())
		msgs, err := readMessages(s.log, s.name, p.from, readChunk)
		if err != nil {
			s.svc.log.Error("jetstream: read messages to deliver", "stream", s.name, "consumer", c.name, "seq", p.from, "err", err)
			p.readEnd = 0
		}
		c.ahead = msgs
	}
	p.interest = make(map[string]bool, len(p.replies)+1)
	for _, r := range p.replies {
		p.interest[r] = c.out.Interest(r)
	}
	if p.pushTo != "" {
		p.interest[p.pushTo] = c.out.Interest(p.pushTo)
	}
}

// outgoing is a message a round sends.
type outgoing struct {
	to  string
	msg OutMessage
}

// candidate is the next message to deliver and how it comes.
type candidate struct {
	m    *Message
	dc   uint64 // delivery count, this one included
	kind deliveryKind
}

type deliveryKind int

const (
	fresh deliveryKind = iota
	lastOfSubject
	redelivery
)

// collect, under the lock, picks what goes out this round and records it
// as delivered. more says another round may deliver more (a read is
// needed); next is when the consumer has something to do again.
func (c *consumer) collect(now time.Time, p *roundPlan) (sends []outgoing, next time.Time, more bool) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.halted {
		return nil, time.Time{}, false
	}
	if p.from > 0 && len(c.ahead) == 0 && p.readEnd > p.from {
		c.cursor = max(c.cursor, min(p.readEnd-1, s.last)) // no record there: control batches
	}
	sends = c.expireRequestsLocked(now, sends)
	for {
		to, r := c.targetLocked(p.interest)
		if to == "" {
			break
		}
		cand, needRead := c.nextLocked()
		if cand.m == nil {
			more = more || needRead
			break
		}
		out := c.messageLocked(cand)
		if r != nil && r.maxBytes > 0 {
			size := len(out.Subject) + len(out.Reply) + len(out.Header) + len(out.Data)
			if size > r.maxBytes-r.sentBytes {
				sends = append(sends, r.status("409", "Message Size Exceeds MaxBytes"))
				c.dropRequestLocked(r)
				continue
			}
			r.sentBytes += size
		}
		c.deliveredLocked(cand, now)
		out.Reply = c.ackReply(cand) // after: it carries the pending count left
		sends = append(sends, outgoing{to: to, msg: out})
		if r != nil {
			r.sent++
			r.nextBeat = now.Add(r.heartbeat)
			if r.sent >= r.batch || r.maxBytes > 0 && r.sentBytes >= r.maxBytes {
				c.dropRequestLocked(r)
			}
		}
	}
	sends = c.endNoWaitLocked(now, sends, more)
	sends = c.heartbeatsLocked(now, p, sends)
	return sends, c.nextDueLocked(), more
}

// targetLocked returns where the next message goes: the deliver subject
// of a push consumer with a subscriber, or the oldest pull request whose
// client still listens (requests of clients gone are dropped, as
// nats-server does).
func (c *consumer) targetLocked(interest map[string]bool) (string, *pullRequest) {
	if c.cfg.push() {
		if interest[c.cfg.DeliverSubject] {
			return c.cfg.DeliverSubject, nil
		}
		return "", nil
	}
	for len(c.waiting) > 0 {
		r := c.waiting[0]
		if has, checked := interest[r.reply]; checked && !has {
			c.dropRequestLocked(r)
			continue
		}
		return r.reply, r
	}
	return "", nil
}

// nextLocked returns the next message to deliver without taking it, or
// none; needRead says a read would find one.
func (c *consumer) nextLocked() (candidate, bool) {
	s := c.s
	for len(c.redeliver) > 0 {
		seq := c.redeliver[0]
		if c.pending[seq] == nil { // acknowledged meanwhile
			c.redeliver = c.redeliver[1:]
			continue
		}
		m := c.fetched[seq]
		if m == nil {
			return candidate{}, true
		}
		dc := max(c.rdc[seq], 1) + 1
		if !s.subjects.has(m.Subject, seq) || c.cfg.MaxDeliver > 0 && dc > uint64(c.cfg.MaxDeliver) {
			// Gone from the stream, or delivered max_deliver times: no
			// more deliveries; rdc keeps the count, as nats-server's.
			delete(c.pending, seq)
			delete(c.fetched, seq)
			c.redeliver = c.redeliver[1:]
			c.dirty = true
			continue
		}
		return candidate{m: m, dc: dc, kind: redelivery}, false
	}
	if c.maxAckPendingReached() {
		return candidate{}, false
	}
	for len(c.lps) > 0 {
		m := c.fetched[c.lps[0]]
		if m == nil {
			return candidate{}, true
		}
		if !s.subjects.has(m.Subject, m.Seq) {
			delete(c.fetched, m.Seq)
			c.lps = c.lps[1:]
			continue
		}
		return candidate{m: m, dc: 1, kind: lastOfSubject}, false
	}
	for len(c.ahead) > 0 {
		m := c.ahead[0]
		if m.Seq > s.last { // in the log, not yet in the stream
			c.ahead = nil
			return candidate{}, false
		}
		if m.Seq > c.cursor && c.filter.matches(m.Subject) && s.subjects.has(m.Subject, m.Seq) {
			return candidate{m: m, dc: 1, kind: fresh}, false
		}
		c.ahead = c.ahead[1:]
		if m.Seq > c.cursor {
			c.cursor = m.Seq
			c.dirty = true
		}
	}
	return candidate{}, c.cursor < s.last
}

// deliveredLocked takes the candidate and records its delivery.
func (c *consumer) deliveredLocked(cand candidate, now time.Time) {
	m := cand.m
	switch cand.kind {
	case fresh:
		c.ahead = c.ahead[1:]
		c.cursor = m.Seq
		c.npending--
	case lastOfSubject:
		c.lps = c.lps[1:]
		delete(c.fetched, m.Seq)
		c.npending--
	case redelivery:
		c.redeliver = c.redeliver[1:]
		delete(c.fetched, m.Seq)
		c.rdc[m.Seq] = cand.dc
	}
	c.dseq++
	c.dsseq = max(c.dsseq, m.Seq)
	c.lastDelivery, c.lastBeat, c.lastActive = now, now, now
	c.dirty = true
	if c.cfg.AckPolicy == AckNone {
		c.floorC, c.floorS = c.dseq, c.dsseq
		c.s.ackedLocked(c, m.Seq, m.Subject)
		return
	}
	p := c.pending[m.Seq]
	if p == nil {
		p = &pendingAck{subject: m.Subject}
		c.pending[m.Seq] = p
	}
	p.cseq, p.sent, p.deadline = c.dseq, now, now.Add(c.ackWait(cand.dc))
	heap.Push(&c.timers, deadline{at: p.deadline, seq: m.Seq})
}

// messageLocked is the message a delivery sends, but its reply subject.
func (c *consumer) messageLocked(cand candidate) OutMessage {
	m := cand.m
	out := OutMessage{Subject: m.Subject, Header: m.Header, Data: m.Data}
	if c.cfg.HeadersOnly {
		out.Header = withField(m.Header, "Nats-Msg-Size", strconv.Itoa(len(m.Data)))
		out.Data = nil
	}
	return out
}

// ackReply is a delivery's reply subject, which the client acknowledges
// on and reads the delivery's metadata from:
// $JS.ACK.<stream>.<consumer>.<delivery count>.<stream seq>.<consumer
// seq>.<time ns>.<pending>.
func (c *consumer) ackReply(cand candidate) string {
	b := make([]byte, 0, 64+len(c.s.name)+len(c.name))
	b = append(b, "$JS.ACK."...)
	b = append(b, c.s.name...)
	b = append(b, '.')
	b = append(b, c.name...)
	for _, n := range []uint64{cand.dc, cand.m.Seq, c.dseq, uint64(cand.m.Time.UnixNano()), c.npending} {
		b = append(b, '.')
		b = strconv.AppendUint(b, n, 10)
	}
	return string(b)
}

// expireLocked moves every delivery whose ack deadline passed to the
// redelivery queue.
func (c *consumer) expireLocked(now time.Time) {
	for len(c.timers) > 0 && !c.timers[0].at.After(now) {
		d := heap.Pop(&c.timers).(deadline)
		if p := c.pending[d.seq]; p == nil || !p.deadline.Equal(d.at) {
			continue // acknowledged, or its deadline moved
		}
		c.queueRedeliveryLocked(d.seq)
	}
}

// queueRedeliveryLocked puts seq on the redelivery queue, in order.
func (c *consumer) queueRedeliveryLocked(seq uint64) {
	if i, found := slices.BinarySearch(c.redeliver, seq); !found {
		c.redeliver = slices.Insert(c.redeliver, i, seq)
	}
}

// heartbeatsLocked adds the idle heartbeats due: to each pull request
// that asked for them, and to a push consumer's subscribers.
func (c *consumer) heartbeatsLocked(now time.Time, p *roundPlan, sends []outgoing) []outgoing {
	last := []record.RecordHeader{field("Nats-Last-Consumer", strconv.FormatUint(c.dseq, 10)), field("Nats-Last-Stream", strconv.FormatUint(c.dsseq, 10))}
	for _, r := range c.waiting {
		if r.heartbeat > 0 && !now.Before(r.nextBeat) {
			sends = append(sends, outgoing{to: r.reply, msg: OutMessage{Subject: r.reply, Header: statusHeader("100", "Idle Heartbeat", last...)}})
			r.nextBeat = now.Add(r.heartbeat)
		}
	}
	if hb := c.cfg.Heartbeat; hb > 0 && p.interest[c.cfg.DeliverSubject] && now.Sub(c.lastBeat) >= hb {
		sends = append(sends, outgoing{to: c.cfg.DeliverSubject, msg: OutMessage{Subject: c.cfg.DeliverSubject, Header: statusHeader("100", "Idle Heartbeat", last...)}})
		c.lastBeat = now
	}
	return sends
}

// nextDueLocked is when the consumer next has something to do by time: a
// redelivery, a pull request's expiry or heartbeat, a push heartbeat.
func (c *consumer) nextDueLocked() time.Time {
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if len(c.timers) > 0 {
		earliest(c.timers[0].at)
	}
	for _, r := range c.waiting {
		earliest(r.expires)
		if r.heartbeat > 0 {
			earliest(r.nextBeat)
		}
	}
	if hb := c.cfg.Heartbeat; hb > 0 {
		earliest(c.lastBeat.Add(hb))
	}
	return next
}
