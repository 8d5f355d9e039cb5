package mq

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"
)

// timers runs the queues' timed work on one goroutine per Registry:
// expiring messages at the heads of queues (x-message-ttl, expiration),
// deleting unused queues (x-expires) and noticing deliveries left
// unacknowledged past the consumer timeout. A queue arms a timer for the
// earliest moment something may be due (queue.armLocked); when it fires,
// the queue does what is due and arms the next. Stale timers (for a moment
// that is no longer the queue's earliest) just cause an extra check.
type timers struct {
	r *Registry

	// coarse is the clock as of the goroutine's last wake-up (at least
	// every coarseTick): bookkeeping that tolerates being a little late
	// (when a delivery was made, for the consumer timeout) reads it rather
	// than the clock on every message.
	coarse atomic.Int64

	mu   sync.Mutex
	heap timerHeap
	wake chan struct{} // capacity 1: an earlier timer was armed
	stop chan struct{}
	done chan struct{}
}

type timer struct {
	at int64 // ms
	q  *queue
}

type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = timer{}
	*h = old[:len(old)-1]
	return t
}

// coarseTick is the resolution of the coarse clock.
const coarseTick = 100 * time.Millisecond

func newTimers(r *Registry) *timers {
	t := &timers{r: r, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	t.coarse.Store(r.nowMs())
	return t
}

// lateNowMs is the time in ms rounded up to the coarse clock's
// resolution: never earlier than now, at most coarseTick later.
func (t *timers) lateNowMs() int64 { return t.coarse.Load() + coarseTick.Milliseconds() }

// schedule arms a timer for q at ms. It never blocks; callers hold q's
// lock (lock order: queue, then timers).
func (t *timers) schedule(q *queue, at int64) {
	t.mu.Lock()
	heap.Push(&t.heap, timer{at: at, q: q})
	earliest := t.heap[0].q == q && t.heap[0].at == at
	t.mu.Unlock()
	if earliest {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

func (t *timers) run() {
	defer close(t.done)
	clock := time.NewTimer(time.Hour)
	defer clock.Stop()
	for {
		wait := t.fire(t.r.nowMs())
		if wait < 0 || wait > coarseTick {
			wait = coarseTick
		}
		clock.Reset(wait)
		select {
		case <-t.wake:
		case <-clock.C:
		case <-t.stop:
			return
		}
	}
}

// fire runs every timer due at now (ms), with no lock held, and returns
// how long until the next one (-1: none).
func (t *timers) fire(now int64) time.Duration {
	t.coarse.Store(now)
	for {
		t.mu.Lock()
		if len(t.heap) == 0 {
			t.mu.Unlock()
			return -1
		}
		next := t.heap[0]
		if next.at > now {
			t.mu.Unlock()
			return time.Duration(next.at-now) * time.Millisecond
		}
		heap.Pop(&t.heap)
		t.mu.Unlock()
		next.q.onTimer(now)
	}
}

// shutdown stops the goroutine.
func (t *timers) shutdown() {
	close(t.stop)
	<-t.done
}

// armLocked asks for onTimer at ms at (or earlier).
func (q *queue) armLocked(at int64) {
	if q.deleted || (q.timerAt != 0 && q.timerAt <= at) {
		return
	}
	q.timerAt = at
	q.r.timers.schedule(q, at)
}

// armHeadsLocked arms the timer for the earliest expiry among the heads
// of the priority levels (only heads expire, as in RabbitMQ).
func (q *queue) armHeadsLocked() {
	earliest := int64(0)
	for l := range q.ready.levels {
		d := &q.ready.levels[l]
		if d.Len() == 0 {
			continue
		}
		if at := d.Front().expiresAt; at > 0 && (earliest == 0 || at < earliest) {
			earliest = at
		}
	}
	if earliest > 0 {
		q.armLocked(earliest)
	}
}

// timeoutNotice is a consumer to tell that a delivery timed out.
type timeoutNotice struct {
	n   TimeoutNotifier
	tag QueueTag
}

// onTimer does what is due at now: expired messages at the heads are
// dropped (dead-lettered, reason expired), consumers holding deliveries
// past the consumer timeout are told (once per delivery), and an unused
// queue past x-expires is deleted. Then the next timer is armed.
func (q *queue) onTimer(now int64) {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return
	}
	q.timerAt = 0
	q.expireHeadsLocked(now)
	q.armHeadsLocked()
	notices, timeout := q.timedOutLocked(now)
	expired := q.unusedLocked(now)
	q.unlock()
	for _, n := range notices {
		n.n.DeliveryTimedOut(n.tag, timeout)
	}
	if expired {
		q.vh.expireQueue(q)
	}
}

// expireHeadsLocked drops the expired messages at the head of every
// priority level. A recovered message whose expiry is not known yet (not
// read since the restart) stops its level until it is read.
func (q *queue) expireHeadsLocked(now int64) {
	for l := range q.ready.levels {
		d := &q.ready.levels[l]
		for d.Len() > 0 {
			at := d.Front().expiresAt
			if at <= 0 || at > now {
				break
			}
			q.dropHeadLocked(l, reasonExpired, now)
		}
	}
}

// timedOutLocked finds the deliveries held longer than the consumer
// timeout by consumers that can be told, marks them told, and arms the
// timer for the next one that may time out. It returns one notice per
// consumer (its oldest such delivery) and the timeout.
func (q *queue) timedOutLocked(now int64) ([]timeoutNotice, time.Duration) {
	timeout := q.consumerTimeoutMs()
	if timeout < 0 || q.timeoutAt == 0 {
		return nil, 0
	}
	if now < q.timeoutAt {
		q.armLocked(q.timeoutAt)
		return nil, 0
	}
	type oldestDelivery struct {
		tag QueueTag
		at  int64
	}
	oldest := map[*Subscription]oldestDelivery{}
	next := int64(0)
	for _, e := range q.unacked {
		if e.deliveredAt == 0 || e.holder == nil {
			continue
		}
		if now-e.deliveredAt <= timeout {
			if due := e.deliveredAt + timeout + 1; next == 0 || due < next {
				next = due
			}
			continue
		}
		if o, seen := oldest[e.holder]; !seen || e.deliveredAt < o.at {
			oldest[e.holder] = oldestDelivery{tag: e.tag, at: e.deliveredAt}
		}
		e.deliveredAt = 0 // told once
	}
	notices := make([]timeoutNotice, 0, len(oldest))
	for s, o := range oldest {
		notices = append(notices, timeoutNotice{n: s.notifier, tag: o.tag})
	}
	q.timeoutAt = next
	if next > 0 {
		q.armLocked(next)
	}
	return notices, time.Duration(timeout) * time.Millisecond
}

// unusedLocked reports whether the queue has been unused for x-expires;
// otherwise it arms the timer for when it would be.
func (q *queue) unusedLocked(now int64) bool {
	if q.opts.expires == 0 || len(q.consumers) > 0 {
		return false
	}
	deadline := q.lastUsed + q.opts.expires
	if now >= deadline {
		return true
	}
	q.armLocked(deadline)
	return false
}

// expireQueue deletes q for x-expires if it is still unused. No lock may
// be held.
func (v *VHost) expireQueue(q *queue) {
	v.defMu.Lock()
	var cleanup deletions
	if v.queues[q.name] == q && !v.r.closed.Load() {
		q.mu.Lock()
		unused := !q.deleted && len(q.consumers) == 0 && v.r.nowMs() >= q.lastUsed+q.opts.expires
		q.mu.Unlock()
		if unused {
			if err := v.deleteQueueLocked(q, &cleanup); err != nil {
				v.r.logger.Error("mq: delete expired queue", "queue", q.name, "vhost", v.name, "err", err)
			}
		}
	}
	v.defMu.Unlock()
	cleanup.run(v.r)
}
