package mq

import "slices"

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
