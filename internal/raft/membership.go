package raft

import (
	"maps"
	"slices"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Membership changes, one member at a time.
//
// A node joins a group as a learner (it receives the log, and the
// leader's snapshot if it starts empty, but does not vote), is promoted
// to a voter once it has caught up, and an old voter is removed only
// after that: at every step a majority of the voters has everything
// committed, so a change never costs an acknowledged entry, and a new
// member that is still far behind never counts towards (or holds up) a
// commit. Each step is one single-member change, which Raft applies
// without a joint configuration. A change proposed while another is not
// yet applied is dropped by Raft, and applying one twice changes
// nothing, so the owner may simply propose again what Membership still
// lacks.

// Membership is a group's configuration as this node last applied it.
type Membership struct {
	Voters   []uint64 // sorted
	Learners []uint64 // sorted
	// On the leader only: how far each member's log matches the
	// leader's, and the leader's own last index.
	Match     map[uint64]uint64
	LastIndex uint64
}

// CaughtUp reports whether member id's log is within lag entries of the
// leader's (on the leader; false elsewhere).
func (m Membership) CaughtUp(id uint64, lag uint64) bool {
	match, ok := m.Match[id]
	return ok && match+lag >= m.LastIndex
}

// Membership returns the group's configuration, with the members'
// progress on the leader.
func (g *Group) Membership() Membership {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.rn.Status()
	m := Membership{
		Voters:   slices.Sorted(maps.Keys(st.Config.Voters.IDs())),
		Learners: slices.Sorted(maps.Keys(st.Config.Learners)),
	}
	if st.RaftState == etcdraft.StateLeader {
		m.Match = map[uint64]uint64{}
		for id, pr := range st.Progress {
			m.Match[id] = pr.Match
		}
		m.LastIndex = st.Progress[g.h.cfg.NodeID].Match
	}
	return m
}

// AddLearner proposes id as a learner of the group (on the leader).
func (g *Group) AddLearner(id uint64) error {
	return g.proposeMemberChange(pb.ConfChangeAddLearnerNode, id)
}

// Promote proposes learner id as a voter (on the leader).
func (g *Group) Promote(id uint64) error { return g.proposeMemberChange(pb.ConfChangeAddNode, id) }

// RemoveMember proposes removing id, voter or learner (on the leader).
func (g *Group) RemoveMember(id uint64) error {
	return g.proposeMemberChange(pb.ConfChangeRemoveNode, id)
}

// proposeMemberChange proposes one single-member change.
func (g *Group) proposeMemberChange(typ pb.ConfChangeType, id uint64) error {
	return g.ProposeConfChange(&pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: &id}}})
}
