package replica

import (
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

// SetCallHandler installs what answers the calls other nodes make to
// this replica's owner (raft.Host.Call).
func (l *RaftLog) SetCallHandler(fn raft.CallHandler) { l.group.SetCallHandler(fn) }
