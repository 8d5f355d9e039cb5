package mq

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/queuestore"
	"github.com/wharf-mq/wharf/internal/quorumstore"
	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/replica"
)

// errForwardRefused answers a forward the leader did not take: the queue
// is no longer (or not yet) served there, or it is full
// (x-overflow reject-publish). The forwarding node nacks.
var errForwardRefused = errors.New("mq: the quorum queue's leader did not take the forwarded message (not served there, or full)")

// takeForwarded publishes into the queue, on its leader, the messages
// another node forwarded as a raw proposal (replica's forward handler).
func (m *quorumReplica) takeForwarded(_ context.Context, batches []byte) (int64, error) {
	return 0, m.takeForward(batches, 0, quorumstore.Forward{})
}

// takeForward publishes into the queue, on its leader, the messages
// another node forwarded (its clients' publishes, see forwards), and
// returns once they are committed: the forwarding node then confirms
// them. With an id (the forwarding node's for this forward) each message
// is logged under it and its index, so that a new leader knows it was
// taken (forwards.recall), and those the log held at the takeover
// (inLog: an earlier attempt's, however its records were split over the
// group's entries) are not taken again: Replay waited for their commit.
func (m *quorumReplica) takeForward(batches []byte, id uint64, inLog quorumstore.Forward) error {
	q := m.q
	var targets []replica.Target // the services of the terms they went to: one, unless the term changed
	index := -1
	err := quorumstore.Forwarded(batches, func(batch []byte, ts int64, sm queuestore.Message) error {
		index++
		if inLog.Holds(index) {
			return nil
		}
		msg, err := decodeStored(sm)
		if err != nil {
			return err
		}
		stored := &storedMessage{msg: sm, at: ts, batch: batch, forwarded: quorumstore.ForwardedAs{ID: id, Index: index}}
		out, logged, _, err := q.publish(&held{msg: msg, size: int64(len(msg.Body))}, stored, ts, true)
		switch {
		case err != nil:
			return err
		case out != taken || logged == nil:
			return errForwardRefused
		}
		if !slices.Contains(targets, logged) {
			targets = append(targets, logged)
		}
		return nil
	})
	for _, t := range targets {
		if err != nil {
			break
		}
		err = t.Sync() // proposes them together and waits for the commit
	}
	return err
}

// forwards are, on a quorum queue's leader, the forwarded publishes
// (opPublish) it took lately, by id. A forwarding node repeats a call
// whose answer it did not get (every callAttempt, to each node it tries),
// and during a partition the repeats may all arrive once it heals: as
// RabbitMQ drops a channel's repeated publishes, the leader takes each
// forward once and answers a repeat with the first one's outcome. A new
// leader recalls the forwards its predecessors logged.
type forwards struct {
	mu     sync.Mutex
	byID   map[uint64]*forwardCall
	recent []*forwardCall // in the order they came, for forgetting
	// clock is what they age on: it leaves out this process's stops, so
	// that the repeats a leader stopped for minutes finds in its socket
	// buffers when it resumes still meet their first copies here.
	clock raft.AwakeClock
}

// forwardCall is one forwarded publish: done is closed once err is its
// outcome.
type forwardCall struct {
	id   uint64
	at   time.Duration // when it came, on forwards.clock
	done chan struct{}
	err  error
	// logged is what the queue's log held of the forward at the last
	// takeover that recalled it, and ran whether it was taken (or is
	// being taken) here since: a recalled forward is taken at its first
	// repeat, but for its logged messages.
	logged quorumstore.Forward
	ran    bool
}

// forwardMemory is how long a forward is remembered: longer than its
// forwarding node keeps repeating it (syncWaitRemote), with a margin for
// repeats held up on their way. A repeat is a raft call, which expires
// at its caller's deadline, so within syncWaitRemote of the forward's
// start, and is read within about 20 s of being written (internal/raft's
// forward.go: the TCP transport's write deadline and userTimeout, 10 s
// each), not counting this process's stops (forwards.clock).
const forwardMemory = 4 * syncWaitRemote

// once runs take for forward id unless it ran (or runs) already, with
// what the log held of it at the takeover, and returns its outcome; a
// repeat waits for the first one's, or until ctx ends. Id 0 (no id)
// always runs.
func (f *forwards) once(ctx context.Context, id uint64, take func(logged quorumstore.Forward) error) error {
	if id == 0 {
		return take(quorumstore.Forward{})
	}
	c, first := f.begin(id, time.Now())
	if first {
		c.err = take(c.logged)
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

// recall notes what the queue's log holds of the forwards younger than
// forwardMemory (a new leader's, from Replay): a repeat of one takes
// only the rest. A forward taken here already (as the leader of an
// earlier term) keeps its outcome, but a failed one is forgotten: that
// failure was its earlier term's (the term ended, the queue was full),
// and the log tells what of it was taken since, so a repeat takes the
// rest. One still being taken goes on into this term and keeps its
// outcome: Replay did not see what it logs from now on.
func (f *forwards) recall(logged []quorumstore.Forward, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	awake := f.clock.Read(now)
	for id, c := range f.byID {
		if c.failed() {
			// Replaced, not changed: a repeat that waited on it may
			// still read its err.
			f.addLocked(id, c.at)
		}
	}
	for _, l := range logged {
		age := now.Sub(time.UnixMilli(l.At))
		if age > forwardMemory {
			continue
		}
		c := f.byID[l.ID]
		if c == nil {
			c = f.addLocked(l.ID, awake-age)
		}
		if !c.ran {
			c.logged = l
		}
	}
}

// failed reports whether c ran and failed.
func (c *forwardCall) failed() bool {
	select {
	case <-c.done:
		return c.err != nil
	default:
		return false
	}
}

// begin returns forward id's call, and whether the caller runs it: a new
// one, or one only recalled so far. It forgets the calls older than
// forwardMemory (on f.clock, read at now).
func (f *forwards) begin(id uint64, now time.Time) (*forwardCall, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at := f.clock.Read(now)
	for len(f.recent) > 0 && at-f.recent[0].at > forwardMemory {
		if old := f.recent[0]; f.byID[old.id] == old { // else recall replaced it
			delete(f.byID, old.id)
		}
		f.recent[0] = nil
		f.recent = f.recent[1:]
	}
	c := f.byID[id]
	if c == nil {
		c = f.addLocked(id, at)
	}
	first := !c.ran
	c.ran = true
	return c, first
}

// addLocked remembers a new call for forward id, of at (on f.clock).
// Caller holds mu.
func (f *forwards) addLocked(id uint64, at time.Duration) *forwardCall {
	if f.byID == nil {
		f.byID = make(map[uint64]*forwardCall)
	}
	c := &forwardCall{id: id, at: at, done: make(chan struct{})}
	f.byID[id] = c
	f.recent = append(f.recent, c)
	return c
}
