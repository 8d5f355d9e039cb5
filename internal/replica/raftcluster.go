package replica

import (
	"context"
	"errors"
	"slices"
	"time"
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
// a follower it forwards them to the leader (raft.Host.Forward), and
// tries again, on whichever node leads then, until ctx ends. A retry after
// a lost answer may append the batches twice: what is proposed this way
// must be safe to apply twice (the metadata records are: the newest value
// of a key wins).
func (l *RaftLog) Propose(ctx context.Context, batches []byte) (int64, error) {
	for {
		leader, _, leading := l.Leadership()
		var (
			offset int64
			err    error
		)
		switch {
		case leading:
			offset, err = l.appendCommitted(ctx, batches)
		case leader != 0 && leader != l.host.NodeID():
			offset, err = l.host.Forward(ctx, l.group.ID(), leader, batches)
		default: // no leader yet, or this node about to lead
			err = &NotLeaderError{Leader: leader}
		}
		if err == nil {
			return offset, nil
		}
		if l.closed.Load() {
			return -1, ErrClosed
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

// appendCommitted appends batches on the leader and waits for the
// commit.
func (l *RaftLog) appendCommitted(ctx context.Context, batches []byte) (int64, error) {
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
