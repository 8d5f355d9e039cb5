package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
)

// What a cluster asks of a Raft log beyond the Log interface: who leads,
// who is in contact, and proposals from any replica.

// Leadership is a replica's view of its group: the leader it knows (0 for
// none), the term, and whether this replica leads it and takes appends.
func (l *RaftLog) Leadership() (leader, term uint64, leading bool) {
	s := l.group.Status()
	return s.Leader, s.Term, s.Leading()
}

// Replicas lists the group's members (voters and learners), in id order.
func (l *RaftLog) Replicas() []uint64 { return l.group.Members() }

// InContact lists the members this node heard from lately (itself
// included): Kafka's in-sync replicas as far as this node can tell.
func (l *RaftLog) InContact() []uint64 {
	return slices.DeleteFunc(l.group.Members(), func(id uint64) bool { return !l.host.PeerUp(id) })
}

// forwardRetry is how long Propose waits before trying again after a
// forward failed or while no leader is known.
const forwardRetry = 50 * time.Millisecond

// Propose appends batches from any replica and returns once they are
// committed, with the offset of the first: on the leader it appends; on
// a follower it forwards them to the leader (raft.Host.Forward). While
// leadership moves it tries again, on whichever node leads then, until
// ctx ends, as a Kafka client retries NOT_CONTROLLER: when no leader is
// known, when the node asked no longer leads (it said so, or a new term
// began: a leader that died never answers), and when a leader could not
// commit the batches in its term (retryable). Any other refusal is
// returned at once. A retry after a lost answer may append the batches
// twice: what is proposed this way must be safe to apply twice (the
// metadata records are: the newest value of a key wins).
func (l *RaftLog) Propose(ctx context.Context, batches []byte) (int64, error) {
	for {
		leader, _, leading := l.Leadership()
		var (
			offset int64
			err    error
		)
		switch {
		case leading:
			offset, err = l.AppendCommitted(ctx, batches)
		case leader != 0 && leader != l.host.NodeID():
			offset, err = l.forward(ctx, leader, batches)
		default: // no leader yet, or this node about to lead
			err = &NotLeaderError{Leader: leader}
		}
		if err == nil {
			return offset, nil
		}
		if l.closed.Load() {
			return -1, ErrClosed
		}
		if ctx.Err() == nil && !retryable(err) {
			return -1, err
		}
		changed := l.changedChan()
		select {
		case <-ctx.Done():
			return -1, errors.Join(ctx.Err(), err)
		case <-changed:
		case <-time.After(forwardRetry):
		}
	}
}

// errLeaderMoved ends a forward to a node that no longer leads as this
// replica knows.
var errLeaderMoved = errors.New("replica: leadership moved while the proposal was forwarded")

// forward forwards batches to leader and waits for its answer, until
// ctx ends or this replica sees leader no longer lead (a new term, or an
// election under way): a leader that died does not answer, and its
// successor should not wait on it.
func (l *RaftLog) forward(ctx context.Context, leader uint64, batches []byte) (int64, error) {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() { // ends with the forward: fctx is cancelled when it returns
		for {
			changed := l.changedChan()
			if now, _, _ := l.Leadership(); now != leader || l.closed.Load() {
				cancel(errLeaderMoved)
				return
			}
			select {
			case <-changed:
			case <-fctx.Done():
				return
			}
		}
	}()
	offset, err := l.host.Forward(fctx, l.group.ID(), leader, batches)
	if cause := context.Cause(fctx); err != nil && errors.Is(cause, errLeaderMoved) {
		return -1, fmt.Errorf("%w (node %d): %v", cause, leader, err)
	}
	return offset, err
}

// retryable reports whether a proposal that failed may succeed if tried
// again, on the leader then: it went to a replica that did not lead, or
// was cut by a change of leadership, or the leader refused it for now
// (ErrAppendRefused), or the leader was closing (its log or its host's
// context), or the leader cannot be reached (raft.ErrUnreachable: this
// node has no connection to it since one broke, or takes it for down;
// the election follows), or the forward reached the leader expired
// (raft.ErrLate: held up on its way; it was not taken, so it is sent
// again as a new one). A leader's answer to a forward is text
// (raft.ErrForwarded), told by these errors' texts.
func retryable(err error) bool {
	for _, target := range []error{ErrNotLeader, ErrAppendRefused, ErrTruncated, errLeaderMoved, ErrClosed, context.Canceled, raft.ErrUnreachable, raft.ErrLate} {
		if errors.Is(err, target) {
			return true
		}
		if errors.Is(err, raft.ErrForwarded) && strings.Contains(err.Error(), target.Error()) {
			return true
		}
	}
	return false
}

// AppendCommitted appends batches on the leader and waits for the
// commit, once: on a replica that does not lead, or that stops leading
// before the commit, it fails with a *NotLeaderError at once, for the
// caller (a node that forwarded them: Propose) to try the leader then.
func (l *RaftLog) AppendCommitted(ctx context.Context, batches []byte) (int64, error) {
	a, err := l.Append(batches, AppendOptions{AckCommitted: true})
	if err != nil {
		return -1, err
	}
	if err := a.Commit.Wait(ctx); err != nil {
		return -1, err
	}
	return a.BaseOffset, nil
}

// WaitHighWatermark waits until the high watermark passes offset, or ctx
// ends.
func (l *RaftLog) WaitHighWatermark(ctx context.Context, offset int64) error {
	for {
		changed := l.changedChan()
		if l.closed.Load() {
			return ErrClosed
		}
		if l.HighWatermark() > offset {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
