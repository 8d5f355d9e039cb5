package raft

import (
	"fmt"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Kind says what an Envelope carries.
type Kind uint8

const (
	// KindRaft carries a Raft message of one group.
	KindRaft Kind = iota + 1
	// KindPing is a node's liveness beacon, one per peer per heartbeat
	// interval whatever the number of groups (Group is 0); Index is the
	// incarnation of the sending host (quiesce.go).
	KindPing
	// KindQuiesce tells a follower that its leader stopped ticking the
	// group at Term, so it may stop too (quiesce.go).
	KindQuiesce
	// KindSnapshotRequest asks a leader for the data of the snapshot at
	// (Index, Term) from Offset on (snapshot.go).
	KindSnapshotRequest
	// KindSnapshotChunk carries record batches of that snapshot starting
	// at Offset.
	KindSnapshotChunk
	// KindForward carries a proposal (Data) a follower forwards to the
	// group's leader; Index is the follower's request id (forward.go).
	KindForward
	// KindForwardReply answers a KindForward of the same Index: the
	// offset the proposal got once committed, or -1 and the error in Data.
	KindForwardReply
	// KindCall carries a request (Data) for the owner of a group's replica
	// on the node it is sent to; Index is the caller's request id
	// (call.go).
	KindCall
	// KindCallReply answers a KindCall of the same Index: Offset 0 and
	// the answer in Data, or -1 and the error in Data.
	KindCallReply
)

func (k Kind) String() string {
	switch k {
	case KindRaft:
		return "raft"
	case KindPing:
		return "ping"
	case KindQuiesce:
		return "quiesce"
	case KindSnapshotRequest:
		return "snapshot-request"
	case KindSnapshotChunk:
		return "snapshot-chunk"
	case KindForward:
		return "forward"
	case KindForwardReply:
		return "forward-reply"
	case KindCall:
		return "call"
	case KindCallReply:
		return "call-reply"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Envelope is one unit of traffic between two hosts: a Raft message or
// one of the host's own messages. A transport carries batches of them, in
// order, between two nodes; it may drop, delay or duplicate a batch (as
// Raft tolerates), but never alter one.
type Envelope struct {
	Kind  Kind
	Group uint64
	// Msg is the Raft message (KindRaft).
	Msg *pb.Message
	// Term and Index name the leader's term (KindQuiesce) or the snapshot
	// (KindSnapshotRequest, KindSnapshotChunk); Index is also a ping's
	// incarnation.
	Term, Index uint64
	// Offset is where a snapshot request or chunk starts.
	Offset int64
	// Data is a chunk's record batches.
	Data []byte
	// Expires is when a forward or a call may no longer be taken, on this
	// node's clock: a copy held up on its way (in a transport's queue
	// while there is no connection, in a socket buffer) is refused once
	// it is older than the receiver remembers what it took (forward.go).
	// A transport carries how long it has left, not the time.
	Expires time.Time
}

// size is about how many bytes the envelope takes in a frame.
func (e *Envelope) size() int {
	n := 32 + len(e.Data)
	if e.Msg != nil {
		for _, ent := range e.Msg.GetEntries() {
			n += len(ent.GetData()) + 16
		}
		if s := e.Msg.GetSnapshot(); s != nil {
			n += len(s.GetData())
		}
		n += 64
	}
	return n
}
