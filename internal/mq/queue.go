package mq

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/queuestore"
	"github.com/wharf-mq/wharf/internal/quorumstore"
	"github.com/wharf-mq/wharf/internal/replica"
)

// queue is one queue: its ready messages (by priority, then FIFO), the
// delivered ones awaiting settlement, its consumers and, when durable, its
// store.
type queue struct {
	r     *Registry
	vh    *VHost
	name  string
	def   QueueDef     // immutable; Durable is false for exclusive queues
	opts  queueOptions // immutable: what def.Args make the queue do
	id    string       // storage directory name (durable queues)
	store queueStore   // nil unless durable (and not a stream)
	// stream is a stream queue's log (its messages are there, not on
	// the ready list); nil for other queues.
	stream *streamLog

	// sources counts the bindings to this queue by source exchange.
	// Guarded by the vhost's mu.
	sources map[*exchange]int

	mu          sync.Mutex
	deleted     bool
	ready       readyQueue
	unacked     map[QueueTag]*entry
	consumers   []*Subscription  // registration order (single active consumer: the first is active)
	groups      []*consumerGroup // the consumers by priority, highest first
	active      int              // consumers neither paused nor cancelled
	exclusive   bool             // a consumer holds exclusive access
	hadConsumer bool             // for auto-delete: only a queue that had a consumer goes
	memBytes    int64

	// fading counts, in a single-active-consumer queue, the unsettled
	// deliveries of cancelled consumers: the next consumer gets nothing
	// until they are settled or back in the queue, so order is kept.
	fading   int
	lastUsed int64 // ms: last consumer gone, basic.get or declare (x-expires)
	timerAt  int64 // ms: the earliest timer armed for this queue, 0 if none
	// timeoutAt is when the earliest watched delivery may pass the
	// consumer timeout (ms; 0 if none): unacked is scanned only then.
	timeoutAt int64
	// outbox holds messages to dead-letter once the lock is released
	// (publishing takes other queues' locks, maybe this one's).
	outbox []deadLetter
	// damage is a read of the queue's log that found its data damaged:
	// the locked section ends by crashing the queue (unlock).
	damage error
	// crashed: the queue's storage failed and it is out of service
	// (crash.go). It is then also deleted, as far as the in-memory
	// machinery goes, but stays in its vhost.
	crashed atomic.Bool
	// gone is set once the queue is deleted for good (or replaced by a
	// declaration of its name under a new id), before its storage and
	// its way to another node go: a message routed to it whose confirm
	// still waits is then confirmed, not nacked, as RabbitMQ's channel
	// confirms what a deleted queue had not confirmed yet (gone.go).
	gone atomic.Bool
	// home is the node a durable queue lives on when that is another
	// one: q is then a placeholder (cluster.go); 0 for a queue of this
	// node. A quorum queue's is its leader, quorumLeaderUnknown if none
	// is known, and changes as leadership moves (quorum_cluster.go).
	home atomic.Int32
	// membership is a quorum queue's nodes in a cluster (nil
	// otherwise), replaced as grow and shrink change them
	// (quorum_members.go); quorum follows its group on a member node
	// (nil elsewhere).
	membership atomic.Pointer[quorumMembership]
	quorum     atomic.Pointer[quorumReplica]
	// remote reaches a quorum queue of the cluster on its leader while
	// it is served elsewhere (quorum_proxy.go), and a classic queue of
	// another node on its home node (classic_remote.go); nil for other
	// queues.
	remote *remoteQueue
	// calls answers other nodes' calls to a classic queue of this node
	// (classic_remote.go), nil until the first.
	calls atomic.Pointer[served]
	stats queueStats // counters for the management API (queue_stats.go)
}

// entry is one message in one queue.
type entry struct {
	tag         QueueTag
	offset      int64 // in the messages log; -1 if not logged (transient or non-durable queue)
	msg         *held // nil while the body is on disk only (logged entries)
	redelivered bool
	level       uint8  // priority level
	returns     uint32 // quorum queues: times returned to the queue (x-delivery-count)
	size        int64  // body bytes (unknown, 0, for recovered messages of queues without x-max-length-bytes)
	// expiresAt is when the message expires (unix ms), 0 never,
	// expiryUnknown for a recovered message not read yet. A message whose
	// body is in memory always has it known.
	expiresAt int64
	// holder is the consumer an unacknowledged message was delivered to
	// (nil for basic.get); deliveredAt is when, if its consumer timeout
	// is still to be watched (0 otherwise).
	holder      *Subscription
	deliveredAt int64
}

const expiryUnknown = -1

// held is a message body in memory, shared by the queues it was routed to;
// it counts toward Registry.MemoryUsed once, while any queue holds it.
type held struct {
	msg  *Message
	size int64
	refs atomic.Int32
}

func (r *Registry) retain(h *held) {
	if h.refs.Add(1) == 1 {
		r.mem.Add(h.size)
	}
}

func (r *Registry) release(h *held) {
	if h.refs.Add(-1) == 0 {
		r.mem.Add(-h.size)
	}
}

// unlock releases the queue's lock, then dead-letters what the locked
// section queued for it, or crashes the queue if it found its log damaged.
// Every locked section that may drop messages or read the log (dispatch,
// settlement, publish, timers, basic.get) ends with it.
func (q *queue) unlock() {
	out, damage := q.outbox, q.damage
	q.outbox, q.damage = nil, nil
	q.mu.Unlock()
	if len(out) > 0 {
		q.vh.publishDeadLetters(q, out)
	}
	if damage != nil {
		q.crash(damage)
	}
}

// holdLocked makes e hold h in memory.
func (q *queue) holdLocked(e *entry, h *held) {
	e.msg = h
	q.memBytes += h.size
	q.r.retain(h)
}

// dropLocked forgets e's in-memory body.
func (q *queue) dropLocked(e *entry) {
	if e.msg != nil {
		q.memBytes -= e.msg.size
		q.r.release(e.msg)
		e.msg = nil
	}
}

func (q *queue) info() QueueInfo {
	q.mu.Lock()
	info := QueueInfo{Name: q.name, Messages: q.ready.Len(), Consumers: len(q.consumers)}
	q.mu.Unlock()
	if q.stream != nil {
		info.Messages = q.streamLength()
	}
	return info
}

// publishOutcome is what a queue did with a published message.
type publishOutcome uint8

const (
	notTaken publishOutcome = iota // the queue is gone
	taken
	refused // x-overflow reject-publish(-dlx) with the queue full
)

// publish appends one copy of a message: to the messages log first if
// stored is not nil (a persistent message in a durable queue), then to the
// ready list, and dispatches; then it applies the length limit and the
// message's TTL. now (ms) is the enqueue time, also stored's; 0 if the
// caller did not need the clock (nor does the queue then, unless it has
// TTLs or limits). With holdBack the message is only buffered
// (logLocked), to be written with the queue's other held-back messages
// before the fsync a confirm waits for; without, it is written now.
// logged is what the confirm must wait for in this queue (nil:
// nothing); backlog is the queue's ready length afterwards.
func (q *queue) publish(h *held, stored *storedMessage, now int64, holdBack bool) (out publishOutcome, logged replica.Target, backlog int, err error) {
	q.mu.Lock()
	defer q.unlock()
	if q.deleted {
		if q.crashed.Load() || q.elsewhere() {
			return refused, nil, 0, nil // a nack: it cannot be stored here
		}
		return notTaken, nil, 0, nil
	}
	o := &q.opts
	if now == 0 && (o.messageTTL >= 0 || o.limited() || h.msg.Properties.Expiration != "") {
		now = q.r.nowMs()
	}
	if o.overflow != dropHead && q.wouldOverflowLocked(h.size) {
		if o.overflow == rejectPublishDLX {
			q.deadLetterLocked(h.msg, reasonMaxlen, now)
		}
		return refused, nil, q.ready.Len(), nil
	}
	e := &entry{
		tag: q.r.newTag(), offset: -1, size: h.size,
		level:     uint8(o.level(h.msg.Properties.Priority)),
		expiresAt: q.expiryOf(h.msg, now),
	}
	if stored != nil && q.logs(h.msg) {
		e.offset, err = q.logLocked(stored, holdBack)
		switch {
		case err != nil && q.quorum.Load() != nil:
			return refused, nil, q.ready.Len(), nil // its term of service failed (it stops serving here): a nack
		case err != nil:
			return notTaken, nil, 0, err
		}
		logged = q.confirmTargetLocked()
	}
	// A logged body stays on disk only when the queue already holds its
	// share of memory and the message is not about to be delivered.
	pageOut := logged != nil && q.memBytes+h.size > q.r.cfg.QueueMemoryBytes &&
		(q.ready.Len() > 0 || q.active == 0)
	if !pageOut {
		q.holdLocked(e, h)
	}
	q.ready.PushBack(e)
	q.stats.published.Add(1)
	q.dispatchLocked(e)
	if o.limited() {
		q.dropOverflowLocked(now)
	}
	if e.expiresAt != 0 {
		// A message with TTL 0 that no consumer took goes now, as in
		// RabbitMQ; others arm the queue's timer.
		q.expireHeadsLocked(now)
		q.armHeadsLocked()
	}
	return taken, logged, q.ready.Len(), nil
}

// logLocked logs a message in the queue's store and returns its offset:
// buffered with holdBack, else written now. A quorum queue's store takes
// the message as a record of its next batch; the local one the message's
// batch.
func (q *queue) logLocked(sm *storedMessage, holdBack bool) (int64, error) {
	switch st := q.store.(type) {
	case *quorumstore.Store:
		if holdBack {
			return st.BufferLocked(sm.msg, sm.at, sm.forwarded)
		}
		return st.AppendLocked(sm.msg, sm.at, sm.forwarded)
	case batchStore:
		if holdBack {
			return st.BufferLocked(sm.encoded())
		}
		return st.AppendLocked(sm.encoded())
	}
	return 0, fmt.Errorf("mq: queue store %T takes no messages", q.store)
}

// logs reports whether the queue keeps m in its messages log.
func (q *queue) logs(m *Message) bool {
	return q.store != nil && (m.Properties.DeliveryMode == 2 || q.opts.kind == quorumQueue)
}

// wouldOverflowLocked reports whether one more message of size bytes
// would exceed the queue's length limits.
func (q *queue) wouldOverflowLocked(size int64) bool {
	o := &q.opts
	return (o.maxLength >= 0 && int64(q.ready.Len()) >= o.maxLength) ||
		(o.maxBytes >= 0 && q.ready.Bytes()+size > o.maxBytes)
}

// dropOverflowLocked drops (and dead-letters, reason maxlen) messages from
// the head while the queue exceeds its length limits (x-overflow
// drop-head).
func (q *queue) dropOverflowLocked(now int64) {
	o := &q.opts
	for q.ready.Len() > 0 &&
		((o.maxLength >= 0 && int64(q.ready.Len()) > o.maxLength) ||
			(o.maxBytes >= 0 && q.ready.Bytes() > o.maxBytes)) {
		_, l := q.ready.Head()
		q.dropHeadLocked(l, reasonMaxlen, now)
	}
}

// dropHeadLocked removes the front of level l, dead-letters it (reading
// its body from the log first if needed) and settles it.
func (q *queue) dropHeadLocked(l int, reason deathReason, now int64) {
	e := q.ready.levels[l].Front()
	if e.msg == nil && q.opts.hasDLX {
		q.pageInLocked(l) // on failure the message goes without a dead letter (logged)
	}
	q.ready.popLevel(l)
	q.discardLocked(e, reason, now)
}

// discardLocked dead-letters e (if the queue has a dead-letter exchange
// and e's body is at hand) and settles it. e is off the ready list and
// out of unacked.
func (q *queue) discardLocked(e *entry, reason deathReason, now int64) {
	if e.msg != nil {
		q.deadLetterLocked(e.msg.msg, reason, now)
	}
	q.settleLocked(e)
}

// expiryOf returns when a message enqueued at now expires: the lower of
// the queue's x-message-ttl and the message's expiration property; 0 if
// neither applies.
func (q *queue) expiryOf(m *Message, now int64) int64 {
	ttl := q.opts.messageTTL
	if exp := m.Properties.Expiration; exp != "" {
		if n, bad := parseExpiration(exp); bad == "" && (ttl < 0 || n < ttl) {
			ttl = n
		}
	}
	if ttl < 0 {
		return 0
	}
	return now + ttl
}

// dispatchLocked hands ready messages to consumers with credit until the
// queue is empty or no consumer takes one. Expired messages met at the
// head are dropped instead (dead-lettered, reason expired), except fresh:
// a message being published is offered once even with TTL 0.
func (q *queue) dispatchLocked(fresh *entry) {
	var now int64
	popped := false
	for q.active > 0 && q.ready.Len() > 0 && q.fading == 0 {
		e, l := q.ready.Head()
		if q.uncommittedLocked(e) {
			break // its replica dispatches again once it commits
		}
		if e.msg == nil && !q.pageInLocked(l) {
			break
		}
		if q.pastDeliveryLimitLocked(e) {
			if now == 0 {
				now = q.r.nowMs()
			}
			q.ready.popLevel(l)
			q.discardLocked(e, reasonDeliveryLimit, now)
			popped = true
			continue
		}
		if e.expiresAt != 0 && e != fresh {
			if now == 0 {
				now = q.r.nowMs()
			}
			if e.expiresAt <= now {
				q.ready.popLevel(l)
				q.discardLocked(e, reasonExpired, now)
				popped = true
				continue
			}
		}
		d := q.deliveryLocked(e)
		s := q.offerLocked(d)
		if s == nil {
			break
		}
		q.ready.popLevel(l)
		q.handOverLocked(e, d, s, s.spec.NoAck)
		popped = true
	}
	if popped {
		q.armHeadsLocked()
	}
}

// deliveryLocked builds the Delivery of e; a quorum queue's returned
// message carries x-delivery-count.
func (q *queue) deliveryLocked(e *entry) *Delivery {
	m := e.msg.msg
	if e.returns > 0 && q.opts.kind == quorumQueue {
		m = withDeliveryCount(m, e.returns)
	}
	return &Delivery{Queue: q.name, Tag: e.tag, Redelivered: e.redelivered, Message: m}
}

// handOverLocked records that e (already off the ready list) was handed to
// consumer s, or to basic.get when s is nil, as d: a quorum queue's d
// gets the handout it waits on, its deliver command (and settle, without
// acks) being logged.
func (q *queue) handOverLocked(e *entry, d *Delivery, s *Subscription, noAck bool) {
	q.stats.handedOver(s != nil, noAck, e.redelivered)
	if e.offset >= 0 {
		q.store.DeliveredLocked(e.offset)
	}
	if noAck {
		q.settleLocked(e)
	}
	if m := q.quorum.Load(); m != nil {
		d.handout = m.store.HandoutLocked()
	}
	if noAck {
		return
	}
	if s != nil {
		e.holder = s
		s.unacked++
		if s.notifier != nil {
			if timeout := q.consumerTimeoutMs(); timeout >= 0 {
				e.deliveredAt = q.r.timers.lateNowMs() // a timeout may come late, never early
				if due := e.deliveredAt + timeout + 1; q.timeoutAt == 0 || due < q.timeoutAt {
					q.timeoutAt = due
					q.armLocked(due)
				}
			}
		}
	}
	q.unacked[e.tag] = e
}

// releaseLocked ends e's time as an unacknowledged delivery (it has just
// left unacked). It reports whether this unblocked a single active
// consumer waiting for its predecessor's deliveries.
func (q *queue) releaseLocked(e *entry) (unblocked bool) {
	s := e.holder
	e.holder, e.deliveredAt = nil, 0
	if s == nil {
		return false
	}
	s.unacked--
	if s.cancelled && q.opts.singleActive && q.fading > 0 {
		q.fading--
		return q.fading == 0
	}
	return false
}

// settleLocked forgets a message for good: its memory, and for a logged
// one, its place in the log.
func (q *queue) settleLocked(e *entry) {
	q.dropLocked(e)
	if e.offset >= 0 && q.store != nil {
		q.store.SettleLocked(e.offset)
	}
}

// pageInBytes is how much of the messages log one page-in reads.
const pageInBytes = 256 << 10

// pageInLocked reads the bodies of on-disk-only ready messages of level l
// from its head on, as far as one read reaches and the queue's memory
// budget allows (always at least the head). A recovered message's expiry
// becomes known here. It reports whether the head now has its body. On a
// read error it logs and leaves the level stuck at that message rather
// than lose it; if the error says the log is damaged, the queue crashes
// when the locked section ends (q.damage).
func (q *queue) pageInLocked(l int) bool {
	d := &q.ready.levels[l]
	head := d.Front()
	i := 0
	var bad error
	err := q.store.ReadLocked(head.offset, pageInBytes, decoding(func(off, ts int64, m *Message) bool {
		for i < d.Len() && d.At(i).msg != nil {
			i++
		}
		if i >= d.Len() {
			return false
		}
		e := d.At(i)
		switch {
		case off < e.offset:
			return true // settled meanwhile, or another level's: skip
		case off > e.offset:
			return false // the entry's record was not in this read
		}
		if e.expiresAt == expiryUnknown {
			e.expiresAt = q.expiryOf(m, ts)
		}
		q.holdLocked(e, &held{msg: m, size: int64(len(m.Body))})
		i++
		return q.memBytes < q.r.cfg.QueueMemoryBytes
	}, &bad))
	if err == nil {
		err = bad
	}
	if err != nil {
		q.r.logger.Error("mq: read message from queue log", "queue", q.name, "vhost", q.vh.name, "offset", head.offset, "err", err)
		if queuestore.IsDamage(err) && q.damage == nil {
			q.damage = err
		}
	}
	return head.msg != nil
}

// requeueLocked puts entries back on the ready list at their original
// positions, marked redelivered.
func (q *queue) requeueLocked(es []*entry) {
	for _, e := range es {
		e.redelivered = true
	}
	q.ready.Requeue(es)
}

// purgeLocked settles every ready message and returns how many there were.
func (q *queue) purgeLocked() int {
	es := q.ready.Drain()
	for _, e := range es {
		q.settleLocked(e)
	}
	return len(es)
}

// markDeletedLocked ends the queue: it takes no more messages, its memory is
// released, and its subscriptions are cancelled. It returns the Cancelled
// callbacks to run once no lock is held.
func (q *queue) markDeletedLocked() []func() {
	q.deleted = true
	for _, e := range q.ready.Drain() {
		q.dropLocked(e)
	}
	for tag, e := range q.unacked {
		q.dropLocked(e)
		delete(q.unacked, tag)
	}
	var callbacks []func()
	for _, s := range q.consumers {
		s.cancelled = true
		if s.stream != nil {
			s.stream.halt()
		}
		if s.spec.Cancelled != nil {
			callbacks = append(callbacks, s.spec.Cancelled)
		}
	}
	q.consumers, q.groups, q.active, q.exclusive, q.fading = nil, nil, 0, false, 0
	q.outbox = nil
	return callbacks
}

// touchLocked records a use of the queue for x-expires (basic.get,
// declare, the last consumer leaving) and arms the expiry timer.
func (q *queue) touchLocked() {
	if q.opts.expires == 0 {
		return
	}
	q.lastUsed = q.r.nowMs()
	if len(q.consumers) == 0 {
		q.armLocked(q.lastUsed + q.opts.expires)
	}
}

// consumerTimeoutMs is the consumer timeout in ms, -1 if none.
func (q *queue) consumerTimeoutMs() int64 {
	t := q.opts.consumerTimeout
	if t == 0 {
		t = q.r.cfg.ConsumerTimeout
	}
	if t < 0 {
		return -1
	}
	return int64(t / time.Millisecond)
}
