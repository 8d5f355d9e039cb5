package raft

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// Group is one Raft group hosted by a Host: what its replica's owner
// proposes through.
type Group struct {
	id    uint64
	h     *Host
	rep   Replica     // cache, over the replica
	cache *entryCache // the entries written lately

	published atomic.Pointer[Status] // status, for readers without mu

	mu          sync.Mutex // guards rn and everything below
	rn          *etcdraft.RawNode
	status      Status
	members     []uint64 // voters and learners, sorted
	appends     []*pendingAppend
	writeAfter  uint64 // appends wait until the host delivered this many sync rounds
	appliedTerm uint64 // term of the last entry applied
	commit      uint64 // the commit index Raft last reported
	toldCommit  uint64 // the commit index last told to the replica (leaderCommitted)
	idleTicks   int    // ticks a leader found nothing to do, for quiescence
	snapRequest snapshotRequest
	forward     ForwardHandler // nil: forwarded proposals are refused
	call        CallHandler    // nil: calls are refused
	removed     bool
	failed      error

	quiesced bool // guarded by h.mu
}

// ID is the group's id.
func (g *Group) ID() uint64 { return g.id }

// Status is the group's state as this node last saw it. A leader whose
// host loop has not ticked for a lease (see Host.alive) is shown as
// neither leading nor leader: its peers may have elected another one
// meanwhile, and it cannot step down while its loop is stuck.
func (g *Group) Status() Status {
	s := *g.published.Load()
	if s.Role == etcdraft.StateLeader && !g.h.alive() {
		s.Ready, s.Leader = false, 0
	}
	return s
}

// Propose appends entries to the group's log as its leader in term: they
// are in the leader's Raft log, in order after everything proposed
// before, when it returns nil. ErrNotLeader unless this node leads term
// and is ready (Status.Leading), or while it hands its leadership over
// (Raft drops proposals then, and the caller should look for the next
// leader); etcd raft's ErrProposalDropped when it refuses them for
// another reason (too much uncommitted).
func (g *Group) Propose(term uint64, ents []*pb.Entry) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.usable(); err != nil {
		return err
	}
	if !g.status.Leading() || g.status.Term != term {
		return ErrNotLeader
	}
	err := g.rn.Step(&pb.Message{Type: pb.MsgProp.Enum(), From: &g.h.cfg.NodeID, Entries: ents})
	if errors.Is(err, etcdraft.ErrProposalDropped) && g.rn.BasicStatus().LeadTransferee != 0 {
		return ErrNotLeader
	}
	if err != nil {
		return err
	}
	g.h.markDirty(g, true)
	return nil
}

// ProposeConfChange proposes a membership change (ConfChangeV2: add or
// remove voters, add learners, promote them) on the leader.
func (g *Group) ProposeConfChange(cc *pb.ConfChangeV2) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.usable(); err != nil {
		return err
	}
	if !g.status.Leading() {
		return ErrNotLeader
	}
	if err := g.rn.ProposeConfChange(cc); err != nil {
		return err
	}
	g.h.markDirty(g, true)
	return nil
}

// Campaign makes this node stand for election now.
func (g *Group) Campaign() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.usable(); err != nil {
		return err
	}
	if err := g.rn.Campaign(); err != nil {
		return err
	}
	g.h.markDirty(g, true)
	return nil
}

// TransferLeadership asks the leader to hand leadership to node to.
func (g *Group) TransferLeadership(to uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.usable() != nil {
		return
	}
	g.rn.TransferLeader(to)
	g.h.markDirty(g, true)
}

// Members lists the group's voters and learners as this node knows them.
func (g *Group) Members() []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]uint64(nil), g.members...)
}

// ProgressStates describes, on the leader, where Raft stands with each
// member (its state, Match, Next, pending snapshot, whether it is paused
// or inactive): what a test shows when a follower does not catch up. Nil
// on a follower.
func (g *Group) ProgressStates() map[uint64]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.status.Role != etcdraft.StateLeader {
		return nil
	}
	m := map[uint64]string{}
	g.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
		// Not pr.String(): WithProgress hands a copy without Inflights.
		m[id] = fmt.Sprintf("%s match=%d next=%d pendingSnap=%d paused=%v active=%v",
			pr.State, pr.Match, pr.Next, pr.PendingSnapshot, pr.MsgAppFlowPaused, pr.RecentActive)
	})
	return m
}

// Quiesced reports whether the group is quiesced on this node (ticks
// no more until something happens).
func (g *Group) Quiesced() bool {
	g.h.mu.Lock()
	defer g.h.mu.Unlock()
	return g.quiesced
}

// setStatus changes the status and publishes a copy. Caller holds g.mu
// (or owns g alone).
func (g *Group) setStatus(s Status) {
	g.status = s
	g.published.Store(&s)
}

// usable returns why g takes no more calls, if it does not. Caller holds
// g.mu.
func (g *Group) usable() error {
	switch {
	case g.removed:
		return ErrRemoved
	case g.failed != nil:
		return g.failed
	}
	return nil
}

func unmarshal(b []byte, m proto.Message) error { return proto.Unmarshal(b, m) }
