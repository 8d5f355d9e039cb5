package kafka

import (
	"slices"
	"sync"
)

// requestBudget bounds the memory that requests hold across all
// connections of a server (Config.QueuedMaxRequestBytes). A connection
// charges a request's frame once it is read, and while kmsg decodes it
// also what decoding may allocate (request_cost.go); the frame's charge is
// returned once the request is answered. While a request does not fit, its
// connection reads nothing more, so the client is slowed by TCP
// back-pressure rather than the server by memory.
//
// Charging complete frames (Kafka reserves the announced size before the
// bytes arrive) means a client that announces a large request and then
// stalls holds nothing: a few such connections cannot freeze everyone
// else until connections.max.idle.ms. What a frame pins while its bytes
// arrive is bounded separately: conn.readFrame grows it as they arrive,
// and takes a large buffer up front only from a second budget, with
// tryAcquire, which never waits.
//
// Waiters are granted first-fit in arrival order: a small request is not
// held up behind a large one that does not fit yet (which could take
// long: some requests, JoinGroup or a long-polling Fetch, stay charged
// while they wait). A request larger than the whole budget is admitted
// once nothing else is charged. A nil *requestBudget is unbounded.
type requestBudget struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	waiters []*budgetWaiter // in arrival order
}

type budgetWaiter struct {
	cost    int64
	granted chan struct{} // closed once cost is charged to the waiter
}

// newRequestBudget returns a budget of limit bytes, or nil (unbounded) for
// a limit that is not positive.
func newRequestBudget(limit int64) *requestBudget {
	if limit <= 0 {
		return nil
	}
	return &requestBudget{limit: limit}
}

// fits reports whether cost can be charged now. Called with mu held.
func (b *requestBudget) fits(cost int64) bool {
	return b.used == 0 || b.used+cost <= b.limit
}

// acquire charges cost, waiting for room. It returns false, charging
// nothing, if stop is closed first.
func (b *requestBudget) acquire(cost int64, stop <-chan struct{}) bool {
	if b == nil || cost == 0 {
		return true
	}
	b.mu.Lock()
	if b.fits(cost) {
		b.used += cost
		b.mu.Unlock()
		return true
	}
	w := &budgetWaiter{cost: cost, granted: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	select {
	case <-w.granted:
		return true
	case <-stop:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.granted: // granted while stopping: give it back
		b.used -= cost
		b.grantWaiters()
	default:
		b.waiters = slices.DeleteFunc(b.waiters, func(o *budgetWaiter) bool { return o == w })
	}
	return false
}

// tryAcquire charges cost if it fits within the limit at once, without
// waiting and without taking room a waiter is waiting for.
func (b *requestBudget) tryAcquire(cost int64) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 || b.used+cost > b.limit {
		return false
	}
	b.used += cost
	return true
}

// release returns cost, charged by acquire or tryAcquire.
func (b *requestBudget) release(cost int64) {
	if b == nil || cost == 0 {
		return
	}
	b.mu.Lock()
	b.used -= cost
	b.grantWaiters()
	b.mu.Unlock()
}

// grantWaiters charges, in arrival order, every waiter that fits. Called
// with mu held.
func (b *requestBudget) grantWaiters() {
	b.waiters = slices.DeleteFunc(b.waiters, func(w *budgetWaiter) bool {
		if !b.fits(w.cost) {
			return false
		}
		b.used += w.cost
		close(w.granted)
		return true
	})
}

// inUse is the bytes charged now (tests).
func (b *requestBudget) inUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
