package raft

import (
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Replica is one node's replica of one group: its Raft log and state, and
// the state machine the group's committed entries drive. internal/replica
// implements it over a partition's segmented log. The host calls it only
// from its loop, holding the group's lock, except Sync and AfterSync (the
// host's sync round, with no lock) and SnapshotData (a snapshot sender);
// those must be safe beside the rest.
type Replica interface {
	// Storage is what etcd raft reads: the log, the hard state and the
	// configuration as written so far.
	etcdraft.Storage

	// Applied is the index of the last entry applied, where Raft resumes
	// after a restart (etcd raft's Config.Applied).
	Applied() uint64

	// Write stores what Raft asked for, in order: the hard state, a
	// snapshot to install, then the entries (any entries from the first
	// one's index on are replaced). It returns how many of the entries it
	// wrote: fewer than all when what it wrote, in this call or an
	// earlier one, must be durable before the rest are written (none at
	// all is fine), in which case the host syncs and calls Write again
	// with the rest, without the hard state and snapshot.
	// Nothing needs to be durable when Write returns.
	Write(w *Write) (written int, err error)
	// Sync makes everything written so far durable.
	Sync() error
	// AfterSync follows a successful Sync once the responses it held back
	// went to the other nodes, in the same goroutine: for what must follow
	// a sync but need not delay the acknowledgements (a log's recovery
	// point, a follower dropping its page cache).
	AfterSync()

	// Apply applies a committed entry, which is durable here. For a
	// membership change the host has applied it to Raft already and cs is
	// the configuration from this entry on; nil otherwise.
	Apply(e *pb.Entry, cs *pb.ConfState) error
	// Committed tells a leader's replica that its entries up to index
	// are committed: a majority has them durable, which may be before
	// this node has, and before they are applied here. The entries up to
	// index that are written here are the group's (none is about to be
	// replaced); the others are not written yet.
	Committed(index uint64)
	// Matched tells a leader's replica, every tick, that every member's
	// log matches its own up to index: entries below it no follower needs
	// any more.
	Matched(index uint64)
	// StateChanged tells the replica its group's term, leader or role
	// changed, or that this node, leading, is ready for proposals.
	StateChanged(s Status)

	// PrepareSnapshot is a follower's answer to a leader's snapshot offer:
	// complete when the snapshot's data is staged and the offer may go to
	// Raft, which then installs it through Write; otherwise the offset to
	// ask the leader's data from (the host sends the request). A follower
	// that needs no data for it (it has the entries already) says
	// complete.
	PrepareSnapshot(s *pb.Snapshot) (from int64, complete bool, err error)
	// StageSnapshot takes a chunk of the data of the snapshot at (index,
	// term) starting at offset; chunks arrive in order, but some may be
	// missing (the next request then asks again from the gap).
	StageSnapshot(index, term uint64, offset int64, data []byte) error
	// SnapshotData streams, on a leader, the data of its snapshot at
	// (index, term) from offset on (a whole-log snapshot from its start,
	// and again from its start if its log was compacted meanwhile, so
	// that one version is sent), calling send for each chunk in order;
	// it fails if the replica's snapshot is no longer that one.
	SnapshotData(index, term uint64, offset int64, send func(offset int64, data []byte) error) error
}

// Write is what one Ready asks a replica to store.
type Write struct {
	HardState *pb.HardState // nil: unchanged
	Snapshot  *pb.Snapshot  // nil: none to install
	Entries   []*pb.Entry
}

// Status is a group's Raft state as this node sees it.
type Status struct {
	ID     uint64 // the group
	Term   uint64
	Leader uint64 // 0 while there is none
	Role   etcdraft.StateType
	// Ready: this node leads Term and has applied an entry of Term. That
	// entry's commit committed every entry before it, so this node's log
	// holds every entry before its proposals, and its applied index (a
	// partition's high watermark) is at or past anything an earlier
	// leader applied: what clients were shown never moves back when
	// leadership moves (Raft's condition for a leader to serve reads;
	// Kafka's KIP-207 for ListOffsets).
	Ready bool
}

// Leading reports whether this node leads and takes proposals.
func (s Status) Leading() bool { return s.Role == etcdraft.StateLeader && s.Ready }
