package mq

import (
	"context"
	"sync"
	"time"
)

// forwards are, on a quorum queue's leader, the forwarded publishes
// (opPublish) it took lately, by id. A forwarding node repeats a call
// whose answer it did not get (every callAttempt, to each node it tries),
// and during a partition the repeats may all arrive once it heals: as
// RabbitMQ drops a channel's repeated publishes, the leader takes each
// forward once and answers a repeat with the first one's outcome.
type forwards struct {
	mu     sync.Mutex
	byID   map[uint64]*forwardCall
	recent []*forwardCall // in the order they came, for forgetting
}

// forwardCall is one forwarded publish: done is closed once err is its
// outcome.
type forwardCall struct {
	id   uint64
	at   time.Time
	done chan struct{}
	err  error
}

// forwardMemory is how long a forward is remembered: longer than its
// forwarding node keeps repeating it (syncWaitRemote), with a margin for
// repeats held up in a partition.
const forwardMemory = 3 * syncWaitRemote

// once runs take for forward id unless it ran (or runs) already, and
// returns its outcome; a repeat waits for the first one's, or until ctx
// ends. Id 0 (no id) always runs.
func (f *forwards) once(ctx context.Context, id uint64, take func() error) error {
	if id == 0 {
		return take()
	}
	c, first := f.begin(id, time.Now())
	if first {
		c.err = take()
		close(c.done)
		return c.err
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// begin returns forward id's call, and whether it is new (the caller
// runs it). It forgets the calls older than forwardMemory.
func (f *forwards) begin(id uint64, now time.Time) (*forwardCall, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.recent) > 0 && now.Sub(f.recent[0].at) > forwardMemory {
		delete(f.byID, f.recent[0].id)
		f.recent[0] = nil
		f.recent = f.recent[1:]
	}
	if c := f.byID[id]; c != nil {
		return c, false
	}
	if f.byID == nil {
		f.byID = make(map[uint64]*forwardCall)
	}
	c := &forwardCall{id: id, at: now, done: make(chan struct{})}
	f.byID[id] = c
	f.recent = append(f.recent, c)
	return c, true
}
