package replica

import (
	"context"

	"github.com/wharf-mq/wharf/internal/raft"
)

// What a log whose owner keeps state from it (a quorum queue's replica,
// internal/quorumstore) asks of a Raft log beyond raftcluster.go: to
// follow leadership, and to see every proposal, forwarded ones included.

// Changed is closed at the next change of the replica's Raft state (a
// new term, leader or role) or of its high watermark: a caller that
// follows leadership reads Leadership, then waits on the channel it took
// before.
func (l *RaftLog) Changed() <-chan struct{} { return l.changedChan() }

// SetForwardHandler replaces what takes the proposals other replicas
// forward to this one while it leads (Propose's append, by default): an
// owner that must apply every proposal it makes takes them itself.
func (l *RaftLog) SetForwardHandler(fn raft.ForwardHandler) { l.group.SetForwardHandler(fn) }

// ForwardToLeader sends batches once to the node leading the group, for
// its forward handler to propose, and returns the handler's answer; a
// *NotLeaderError if no other node is known to lead. Unlike Propose it
// never appends here, nor tries again.
func (l *RaftLog) ForwardToLeader(ctx context.Context, batches []byte) (int64, error) {
	leader, _, _ := l.Leadership()
	if leader == 0 || leader == l.host.NodeID() {
		return -1, &NotLeaderError{Leader: leader}
	}
	return l.host.Forward(ctx, l.group.ID(), leader, batches)
}
