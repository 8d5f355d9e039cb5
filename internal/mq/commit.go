package mq

import (
	"slices"
	"sync"

	"github.com/wharf-mq/wharf/internal/replica"
)

// A commit is a group of publishes whose logged copies become durable
// together, under one waiter of the syncer (replica.Syncer): the
// messages a Publisher took between two flushes, or the one message of an
// unbatched Publish. The goroutine that fills it (the publisher's) sets
// failed and hands it to the syncer, which sets err and closes done
// (finish); readers look at both only after done is closed.
type commit struct {
	done   chan struct{}
	err    error   // a log could not be made durable: every message fails
	failed []int32 // messages whose append was refused, ascending
	n      int32   // messages in the commit
}

func newCommit() *commit { return &commit{done: make(chan struct{})} }

// fail records that message i of the commit was refused. Calls come in
// ascending order per stream, not across streams; finish sorts.
func (c *commit) fail(i int32) { c.failed = append(c.failed, i) }

// finish completes the commit with the fsync's outcome.
func (c *commit) finish(err error) {
	if len(c.failed) > 1 {
		slices.Sort(c.failed)
		c.failed = slices.Compact(c.failed)
	}
	c.err = err
	close(c.done)
}

// awaitDurable calls done, once, when every target is synced, with the
// first error: this node's logs in the syncer's rounds, and each forward
// to another node (remoteForward) on a goroutine of its own. A forward
// waits for an answer over the network, from a leader or home node that
// may be slow, cut off or gone, for up to syncWaitRemote: in a syncer
// round it held up every other confirm of the node that shared the round
// or came after it, local fsyncs included.
func (r *Registry) awaitDurable(targets []replica.Target, done func(error)) {
	forwards := 0
	for _, t := range targets {
		if _, ok := t.(*remoteForward); ok {
			forwards++
		}
	}
	if forwards == 0 {
		r.syncer.Await(targets, done)
		return
	}
	local := make([]replica.Target, 0, len(targets)-forwards)
	for _, t := range targets {
		if _, ok := t.(*remoteForward); !ok {
			local = append(local, t)
		}
	}
	j := &joinedWait{left: forwards, done: done}
	if len(local) > 0 {
		j.left++
	}
	for _, t := range targets {
		if f, ok := t.(*remoteForward); ok {
			r.awaitForward(f, j.finish)
		}
	}
	if len(local) > 0 {
		r.syncer.Await(local, j.finish)
	}
}

// awaitForward calls done with f's outcome. The first waiter of f starts
// the goroutine that sends it and tells every waiter (the registry waits
// for it at Close, which ends the forward's call); once the registry
// closes, f is sent from this one.
func (r *Registry) awaitForward(f *remoteForward, done func(error)) {
	f.waitMu.Lock()
	if f.answered {
		f.waitMu.Unlock()
		done(f.err)
		return
	}
	f.waiters = append(f.waiters, done)
	start := !f.sending
	f.sending = true
	f.waitMu.Unlock()
	if !start {
		return
	}
	if !r.proxies.add(1) {
		f.tell()
		return
	}
	go func() {
		defer r.proxies.wg.Done()
		f.tell()
	}()
}

// tell sends f (Sync) and calls its waiters with the outcome.
func (f *remoteForward) tell() {
	err := f.Sync()
	f.waitMu.Lock()
	f.answered = true
	waiters := f.waiters
	f.waiters = nil
	f.waitMu.Unlock()
	for _, done := range waiters {
		done(err)
	}
}

// joinedWait completes a commit waiting on several outcomes once the last
// came, with the first error.
type joinedWait struct {
	mu   sync.Mutex
	left int
	err  error
	done func(error)
}

func (j *joinedWait) finish(err error) {
	j.mu.Lock()
	if j.err == nil {
		j.err = err
	}
	j.left--
	last := j.left == 0
	j.mu.Unlock()
	if last {
		j.done(j.err)
	}
}

// Durability is what a publisher confirm of one message waits for: the
// fsync of every log the message was written to. The zero Durability
// waits for nothing (the message was not logged).
//
// Messages of one Publisher flushed together share a commit, and their
// Durabilities are then consecutive (see SameCommit): a front end can
// confirm such a run with one multiple ack once Done is closed.
type Durability struct {
	c *commit
	i int32 // the message's index in c
}

// Pending reports whether there is an fsync to wait for.
func (d Durability) Pending() bool { return d.c != nil }

// Done is closed once the message's logs are fsynced (or failed). It is
// nil, blocking forever, for the zero Durability.
func (d Durability) Done() <-chan struct{} {
	if d.c == nil {
		return nil
	}
	return d.c.done
}

// Err is, once Done is closed, nil if the message is durable, or why it is
// not (a storage error, or its stream refused it). The zero Durability has
// no error.
func (d Durability) Err() error {
	if d.c == nil {
		return nil
	}
	if d.c.err != nil {
		return d.c.err
	}
	if _, found := slices.BinarySearch(d.c.failed, d.i); found {
		return ErrStreamRefused
	}
	return nil
}

// Follows reports whether d is the message published right after prev in
// the same commit: a run of such messages is completed by the same fsync.
func (d Durability) Follows(prev Durability) bool {
	return d.c != nil && d.c == prev.c && d.i == prev.i+1
}

// RunErrs calls fn for each message of the run from d to last (Follows
// chain of one commit) whose Err is not nil, with its position in the run.
// Call only after Done is closed. It does nothing when the whole run is
// durable, which is the common case and costs one search.
func (d Durability) RunErrs(last Durability, fn func(pos int, err error)) {
	if d.c == nil {
		return
	}
	if d.c.err != nil {
		for pos := range int(last.i-d.i) + 1 {
			fn(pos, d.c.err)
		}
		return
	}
	from, _ := slices.BinarySearch(d.c.failed, d.i)
	for _, i := range d.c.failed[from:] {
		if i > last.i {
			break
		}
		fn(int(i-d.i), ErrStreamRefused)
	}
}
