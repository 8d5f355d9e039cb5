package crash

import (
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The book of an AMQP crash test: every message handed to the client, what
// the broker said about it (confirm, nack), every delivery and every ack,
// over all broker runs of one test. The checks are made as deliveries come
// in (acked messages coming back) and after each drain (lost messages).

// messageID is what publisher p sends as its seq-th message, as the
// message-id property and as the body.
func messageID(publisher int, seq int64) string {
	return fmt.Sprintf("p-%d-seq-%d", publisher, seq)
}

// message is what the book knows of one published message.
type message struct {
	queue      int  // index of the queue it was published to
	confirmed  bool // the broker acked its publish (basic.ack in confirm mode)
	nacked     bool // the broker nacked its publish
	deliveries int  // times a consumer received it, over all broker runs
	ackSent    bool // a basic.ack for its latest delivery was written without error

	// ackSynced is when a synchronous round trip on the channel that acked
	// it completed after the ack was written, in the current broker run:
	// from then on the broker has processed the ack. Zero: no such ack in
	// this run.
	ackSynced time.Time
	// ackDurable: an ack of it was processed at least the ack margin before
	// a kill, so mq had written the settlement: it must never be
	// delivered again.
	ackDurable bool
	// ackAge is how long before the kill that ended the previous broker
	// run an ack of its latest delivery was processed, if one was
	// processed within the ack margin (it may come back); else zero.
	ackAge time.Duration

	lostReported bool // counted as lost once; later deliveries do not undo it
}

// amqpCounts are the figures of an AMQP crash test, per cycle or in total.
type amqpCounts struct {
	published   int           // handed to Publish
	confirmed   int           // publish acked by the broker
	nacked      int           // publish nacked by the broker
	deliveries  int           // deliveries received by consumers and drains
	redelivered int           // deliveries flagged redelivered by the broker, of which
	flaggedNew  int           // the message's first delivery (the flag is a hint; allowed)
	duplicates  int           // deliveries of a message received before (any reason)
	unflagged   int           // of those, without the redelivered flag (allowed after a crash)
	acksSent    int           // basic.ack written without error
	acksSynced  int           // of those, followed by a completed synchronous round trip
	afterAck    int           // deliveries of a message whose earlier ack was not known to be persisted (allowed), of which
	afterSynced int           // the ack had been processed by the broker, within the ack margin before the kill
	oldestBack  time.Duration // the longest such an ack had been processed before the kill
	promised    int           // acks processed at least the ack margin before a kill (must stay settled; not counting clean stops)
	recentAcks  int           // acks processed within the ack margin before a kill (may come back)

	lost       int // confirmed, never delivered although the queue was drained
	unexpected int // delivered ids never published
	damaged    int // delivered with another body, properties or queue than published
	cameBack   int // delivered after an ack the broker had processed: after a kill it had persisted it, or in the same run
}

func (c amqpCounts) String() string {
	return fmt.Sprintf("published=%d confirmed=%d nacked=%d; deliveries=%d (redelivered flag=%d, on a first delivery=%d; duplicates=%d, without the flag=%d, after an ack lost in the crash=%d, "+
		"of which processed by the broker=%d, the oldest %v before the kill); acks sent=%d synced=%d, at kills: old enough to be checked=%d recent=%d; "+
		"lost=%d unexpected=%d damaged=%d acked-came-back=%d",
		c.published, c.confirmed, c.nacked, c.deliveries, c.redelivered, c.flaggedNew, c.duplicates, c.unflagged, c.afterAck,
		c.afterSynced, c.oldestBack.Round(time.Millisecond), c.acksSent, c.acksSynced, c.promised, c.recentAcks,
		c.lost, c.unexpected, c.damaged, c.cameBack)
}

func (c amqpCounts) ok() bool {
	return c.lost == 0 && c.unexpected == 0 && c.damaged == 0 && c.cameBack == 0
}

// minus subtracts the figures o from c, all but oldestBack, which is c's
// (amqpBook.beginCycle makes it per cycle).
func (c amqpCounts) minus(o amqpCounts) amqpCounts {
	return amqpCounts{
		published: c.published - o.published, confirmed: c.confirmed - o.confirmed, nacked: c.nacked - o.nacked,
		deliveries: c.deliveries - o.deliveries, redelivered: c.redelivered - o.redelivered,
		flaggedNew: c.flaggedNew - o.flaggedNew, unflagged: c.unflagged - o.unflagged,
		duplicates: c.duplicates - o.duplicates, acksSent: c.acksSent - o.acksSent, acksSynced: c.acksSynced - o.acksSynced,
		afterAck: c.afterAck - o.afterAck, afterSynced: c.afterSynced - o.afterSynced, oldestBack: c.oldestBack, promised: c.promised - o.promised, recentAcks: c.recentAcks - o.recentAcks,
		lost: c.lost - o.lost, unexpected: c.unexpected - o.unexpected, damaged: c.damaged - o.damaged, cameBack: c.cameBack - o.cameBack,
	}
}

// amqpBook is shared by every publisher, consumer and drain of one test.
type amqpBook struct {
	t      *testing.T
	margin time.Duration // how long before a kill a processed ack must have been persisted

	mu            sync.Mutex
	msgs          map[string]*message
	run           int // the broker run deliveries come from, 1-based; a kill ends it
	nextPublisher int
	counts        amqpCounts     // oldestBack since beginCycle
	oldestEver    time.Duration  // oldestBack of the cycles before
	reported      map[string]int // problems logged per kind, bounded by maxReported
}

func newAMQPBook(t *testing.T, margin time.Duration) *amqpBook {
	return &amqpBook{t: t, margin: margin, msgs: make(map[string]*message), run: 1, reported: make(map[string]int)}
}

// report fails the test with one problem, logging at most maxReported of
// each kind. Caller holds mu.
func (b *amqpBook) reportLocked(kind, format string, args ...any) {
	if b.reported[kind]++; b.reported[kind] <= maxReported {
		b.t.Errorf("amqp %s: "+format, append([]any{kind}, args...)...)
	} else {
		b.t.Fail()
	}
}

// newPublisher returns a publisher number not used before in this test,
// so message ids stay unique across cycles.
func (b *amqpBook) newPublisher() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextPublisher++
	return b.nextPublisher
}

// published records a message about to be handed to the client: from now
// on it may reach the queue.
func (b *amqpBook) published(id string, queue int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.msgs[id] = &message{queue: queue}
	b.counts.published++
}

// confirmResult records the broker's answer to a publish: basic.ack
// (confirmed) or basic.nack. A message whose channel died before either
// came stays unconfirmed.
func (b *amqpBook) confirmResult(id string, ack bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.msgs[id]
	if ack {
		m.confirmed = true
		b.counts.confirmed++
	} else {
		m.nacked = true
		b.counts.nacked++
	}
}

// delivered checks and records one delivery from queue in broker run run.
// It returns the delivery's id.
func (b *amqpBook) delivered(run, queue int, d *amqp.Delivery) string {
	id := d.MessageId
	b.mu.Lock()
	defer b.mu.Unlock()
	if run != b.run {
		b.t.Errorf("test bug: delivery from broker run %d recorded during run %d", run, b.run)
	}
	b.counts.deliveries++
	if d.Redelivered {
		b.counts.redelivered++
	}
	m := b.msgs[id]
	if m == nil {
		b.counts.unexpected++
		b.reportLocked("unexpected", "queue %s delivered message-id %q body %q, never published", queueName(queue), id, clip(d.Body, 64))
		return id
	}
	if string(d.Body) != id || d.DeliveryMode != amqp.Persistent || d.Exchange != "" || d.RoutingKey != queueName(m.queue) || queue != m.queue {
		b.counts.damaged++
		b.reportLocked("damaged", "%s published to %s persistent, delivered from %s: body %q, delivery-mode %d, exchange %q, routing key %q",
			id, queueName(m.queue), queueName(queue), clip(d.Body, 64), d.DeliveryMode, d.Exchange, d.RoutingKey)
	}
	m.deliveries++
	switch {
	case m.deliveries > 1 && !d.Redelivered:
		b.counts.duplicates++
		b.counts.unflagged++
	case m.deliveries > 1:
		b.counts.duplicates++
	case d.Redelivered:
		b.counts.flaggedNew++
	}
	switch {
	case m.ackDurable:
		b.counts.cameBack++
		b.reportLocked("acked message came back", "%s delivered in broker run %d (redelivered=%v) after an ack the broker had processed at least %v before a kill",
			id, run, d.Redelivered, b.margin)
	case !m.ackSynced.IsZero():
		b.counts.cameBack++
		b.reportLocked("acked message came back", "%s delivered again in broker run %d (redelivered=%v) after an ack the same run had processed at %s",
			id, run, d.Redelivered, m.ackSynced.Format("15:04:05.000"))
	case m.ackSent:
		b.counts.afterAck++
		if m.ackAge > 0 {
			b.counts.afterSynced++
			b.counts.oldestBack = max(b.counts.oldestBack, m.ackAge)
		}
	}
	m.ackSent, m.ackAge = false, 0 // what counts now is the ack of this delivery
	return id
}

// acked records that a basic.ack for id was written without error.
func (b *amqpBook) acked(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := b.msgs[id]; m != nil {
		m.ackSent = true
		b.counts.acksSent++
	}
}

// acksSynced records that a synchronous round trip on the channel that
// acked ids completed at at, after those acks were written: the broker has
// processed them.
func (b *amqpBook) acksSynced(ids []string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		if m := b.msgs[id]; m != nil {
			m.ackSynced = at
			b.counts.acksSynced++
		}
	}
}

// killed ends the current broker run: it was sent SIGKILL right after
// killAt. Acks processed at least margin before killAt must have been
// persisted by mq's housekeeper; later ones may be lost, and those
// messages may come back. Call it after every consumer of the run has
// stopped.
func (b *amqpBook) killed(killAt time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := killAt.Add(-b.margin)
	for _, m := range b.msgs {
		if m.ackSynced.IsZero() {
			continue
		}
		if !m.ackSynced.After(limit) {
			m.ackDurable = true
			b.counts.promised++
		} else {
			b.counts.recentAcks++
			m.ackAge = max(killAt.Sub(m.ackSynced), time.Nanosecond)
		}
		m.ackSynced = time.Time{}
	}
	b.run++
}

// stoppedCleanly ends the current broker run with a clean shutdown, which
// writes every settlement: each ack the broker processed is then durable.
func (b *amqpBook) stoppedCleanly() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.msgs {
		if !m.ackSynced.IsZero() {
			m.ackDurable = true
			m.ackSynced = time.Time{}
		}
	}
	b.run++
}

// checkNothingLost is called once every queue was drained: every
// confirmed message must have been delivered at least once by now.
func (b *amqpBook) checkNothingLost() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, m := range b.msgs {
		if m.confirmed && m.deliveries == 0 && !m.lostReported {
			m.lostReported = true
			b.counts.lost++
			b.reportLocked("lost", "%s was confirmed on %s and never delivered; the queue is drained", id, queueName(m.queue))
		}
	}
}

// currentRun is the broker run deliveries now come from.
func (b *amqpBook) currentRun() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.run
}

// beginCycle starts a cycle's figures and returns the figures so far, to
// subtract from the cycle's snapshot.
func (b *amqpBook) beginCycle() amqpCounts {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.oldestEver = max(b.oldestEver, b.counts.oldestBack)
	b.counts.oldestBack = 0
	return b.counts
}

// snapshot returns the figures so far (oldestBack: of this cycle).
func (b *amqpBook) snapshot() amqpCounts {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts
}

// total returns the figures of the whole test.
func (b *amqpBook) total() amqpCounts {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.counts
	c.oldestBack = max(c.oldestBack, b.oldestEver)
	return c
}
