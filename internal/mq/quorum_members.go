package mq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Quorum queue membership in a cluster (issue 14), as RabbitMQ 4 has it.
//
// Placement: a new quorum queue gets x-quorum-initial-group-size members
// (default min(3, nodes)) among the cluster's current nodes (joined ones
// included, removed ones not), its first member, the node placed to lead,
// being the one that leads the fewest quorum queues, the others those that
// hold the fewest replicas. Whichever member the first election makes
// leader hands its leadership to the first member while the queue's log
// is still empty (handToPreferred), and a declare returns once that is
// done (awaitPlaced), so leaders spread as placed; later elections put
// them where they fall, as RabbitMQ's do.
//
// Grow and shrink (rabbitmq-queues grow/shrink): a change is a target
// membership written into the queue's record (queueRecord.Target); every
// node applies it, and a node the target names that holds no replica
// opens an empty one, which joins the group. The queue's leader drives
// its group towards the target one member at a time, as partition
// reassignments are driven (internal/broker/reassign.go): a new member
// joins as a learner and is promoted once caught up; only then does a
// member outside the target go, the leader first handing its leadership
// to another caught-up member if it is the one to go. When the voters
// are the target, the leader records it as the queue's members; a node
// no longer named closes and deletes its replica. At every step a
// majority of the voters holds every committed command, so nothing
// confirmed is lost. A new change replaces one in progress (current),
// so a grow onto a node that never catches up can be shrunk away again;
// should the leader record the old target just as a new one is written,
// the new one is lost (the members recorded are still the group's
// voters) and the operator runs it again. A joined node gets no replicas
// by itself, as in RabbitMQ: the operator grows the queues onto it.

// quorumMembership is a quorum queue's members as recorded, and the
// target of the change in progress (nil if none).
type quorumMembership struct {
	Members []int32
	Target  []int32
}

// current is the members the queue has or is moving to: a new change
// starts from there, and replaces the one in progress (the leader drives
// the group to the latest target, whatever it reached of the last one;
// so a grow onto a node that never catches up can be undone by a
// shrink).
func (ms *quorumMembership) current() []int32 {
	if ms.Target != nil {
		return ms.Target
	}
	return ms.Members
}

// holds reports whether node holds, or is to hold, a replica.
func (ms *quorumMembership) holds(node int32) bool {
	return slices.Contains(ms.Members, node) || slices.Contains(ms.Target, node)
}

// members are q's recorded members (nil for a queue that is not a
// quorum queue of a cluster).
func (q *queue) members() []int32 {
	if ms := q.membership.Load(); ms != nil {
		return ms.Members
	}
	return nil
}

// shownLeader is the leader of q (a quorum queue of the cluster) for what
// this node shows of it, 0 if unknown. A node that holds no replica
// learns the leader only from its calls; if it knows none, or one that
// is no longer a member or in contact, it asks in the background, and
// shows the answer from then on.
func (q *queue) shownLeader(ms *quorumMembership) int32 {
	leader := q.leader()
	if leader > 0 && slices.Contains(ms.Members, leader) && q.r.peerUp(leader) {
		return leader
	}
	if q.remote != nil && q.quorum.Load() == nil {
		q.remote.probeLeader()
	}
	return 0
}

// probeLeader finds the queue's leader with a call that does nothing
// there (once at a time; it ends with the queue here, or the registry).
func (rq *remoteQueue) probeLeader() {
	if !rq.probing.CompareAndSwap(false, true) {
		return
	}
	rq.setLeader(0) // so that the call tries the members
	go func() {
		defer rq.probing.Store(false)
		ctx, cancel := context.WithTimeout(rq.ctx, callAttempt)
		defer cancel()
		rq.call(ctx, &remoteRequest{Op: opLeader, Queue: rq.q.id}) // a failure leaves the leader unknown
	}()
}

// NodeName is how Wharf names cluster node id in what it shows of
// nodes: RabbitMQ's name@host form.
func NodeName(id int32) string { return fmt.Sprintf("wharf@%d", id) }

// NodeID is this node's id in a cluster, 0 on a single node.
func (r *Registry) NodeID() int32 { return r.nodeID() }

// peerUp reports whether this node is in contact with node (itself
// included).
func (r *Registry) peerUp(node int32) bool {
	up := r.cfg.Cluster.PeerUp
	return node == r.nodeID() || up == nil || up(node)
}

// inContact is those of nodes this node is in contact with.
func (r *Registry) inContact(nodes []int32) []int32 {
	return slices.DeleteFunc(slices.Clone(nodes), func(n int32) bool { return !r.peerUp(n) })
}

// quorumMembers places a new quorum queue's replicas on the cluster's
// current nodes, its leader on the least loaded.
func (r *Registry) quorumMembers(args amqpwire.Table) []int32 {
	nodes := r.cfg.Cluster.Nodes()
	size := min(3, len(nodes))
	if n, ok := argInt(args["x-quorum-initial-group-size"]); ok && n > 0 {
		size = min(int(n), len(nodes))
	}
	leads, holds := r.quorumLoad()
	return placeQuorum(nodes, size, leads, holds)
}

// placeQuorum picks size of nodes: first the one leading the fewest
// queues (leads), then those holding the fewest replicas (holds); ties
// are broken at random, so that nodes declaring at once spread too.
func placeQuorum(nodes []int32, size int, leads, holds map[int32]int) []int32 {
	order := slices.Clone(nodes)
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	leader := slices.MinFunc(order, func(a, b int32) int { return leads[a] - leads[b] })
	rest := slices.DeleteFunc(order, func(n int32) bool { return n == leader })
	slices.SortStableFunc(rest, func(a, b int32) int { return holds[a] - holds[b] })
	return append([]int32{leader}, rest[:size-1]...)
}

// quorumLoad counts, per node, the quorum queues it leads (as this node
// knows; the first member if no leader is known) and the replicas it
// holds.
func (r *Registry) quorumLoad() (leads, holds map[int32]int) {
	leads, holds = map[int32]int{}, map[int32]int{}
	for _, v := range r.vhostList() {
		v.mu.RLock()
		for _, q := range v.queues {
			ms := q.membership.Load()
			if ms == nil || len(ms.Members) == 0 {
				continue
			}
			leader := q.leader()
			if leader <= 0 {
				leader = ms.Members[0]
			}
			leads[leader]++
			for _, n := range ms.Members {
				holds[n]++
			}
		}
		v.mu.RUnlock()
	}
	return leads, holds
}

// vhostList is the registry's vhosts, sorted by name.
func (r *Registry) vhostList() []*VHost {
	r.mu.RLock()
	defer r.mu.RUnlock()
	vs := make([]*VHost, 0, len(r.vhosts))
	for _, v := range r.vhosts {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b *VHost) int { return compareStrings(a.name, b.name) })
	return vs
}

// MembershipChange is what GrowQuorumQueues or ShrinkQuorumQueues asked
// of one quorum queue: its members becoming Target, or why not (Err).
type MembershipChange struct {
	VHost, Queue    string
	Members, Target []int32
	Err             error
}

// Errors of membership changes.
var (
	ErrNotClustered = errors.New("quorum queue membership changes need a cluster")
	ErrUnknownNode  = errors.New("not a node of the cluster")
	errLastMember   = errors.New("the node is the queue's only member")
)

// QuorumSelection picks the quorum queues a grow applies to: those of
// vhosts and names matching (nil: all); EvenOnly, RabbitMQ's "even"
// strategy, keeps only queues with an even number of members.
type QuorumSelection struct {
	VHosts, Queues *regexp.Regexp
	EvenOnly       bool
}

// GrowQuorumQueues adds node as a member of the selected quorum queues
// that lack it (rabbitmq-queues grow). It returns once the changes are
// recorded; each queue's leader carries its change out.
func (r *Registry) GrowQuorumQueues(node int32, sel QuorumSelection) ([]MembershipChange, error) {
	if r.cfg.Cluster == nil {
		return nil, ErrNotClustered
	}
	if !slices.Contains(r.cfg.Cluster.Nodes(), node) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownNode, NodeName(node))
	}
	return r.changeMembership(func(v *VHost, q *queue, members []int32) ([]int32, error) {
		switch {
		case slices.Contains(members, node):
			return nil, nil
		case sel.VHosts != nil && !sel.VHosts.MatchString(v.name), sel.Queues != nil && !sel.Queues.MatchString(q.name):
			return nil, nil
		case sel.EvenOnly && len(members)%2 != 0:
			return nil, nil
		}
		return append(slices.Clone(members), node), nil
	}), nil
}

// ShrinkQuorumQueues removes node's replica from every quorum queue that
// has one, never below one member (rabbitmq-queues shrink); a queue it
// leads hands its leadership on first.
func (r *Registry) ShrinkQuorumQueues(node int32) ([]MembershipChange, error) {
	if r.cfg.Cluster == nil {
		return nil, ErrNotClustered
	}
	return r.changeMembership(func(_ *VHost, _ *queue, members []int32) ([]int32, error) {
		switch {
		case !slices.Contains(members, node):
			return nil, nil
		case len(members) == 1:
			return nil, errLastMember
		}
		return slices.DeleteFunc(slices.Clone(members), func(n int32) bool { return n == node }), nil
	}), nil
}

// changeMembership records, for every quorum queue, the target that
// targetOf gives it (nil: no change).
func (r *Registry) changeMembership(targetOf func(v *VHost, q *queue, members []int32) ([]int32, error)) []MembershipChange {
	var out []MembershipChange
	for _, v := range r.vhostList() {
		v.defMu.Lock()
		v.mu.RLock()
		qs := make([]*queue, 0, len(v.queues))
		for _, q := range v.queues {
			if q.membership.Load() != nil {
				qs = append(qs, q)
			}
		}
		v.mu.RUnlock()
		slices.SortFunc(qs, func(a, b *queue) int { return compareStrings(a.name, b.name) })
		for _, q := range qs {
			ms := q.membership.Load()
			target, err := targetOf(v, q, ms.current())
			if target == nil && err == nil {
				continue
			}
			c := MembershipChange{VHost: v.name, Queue: q.name, Members: ms.Members, Target: target, Err: err}
			if err == nil {
				c.Err = r.recordTarget(v, q, target)
			}
			out = append(out, c)
		}
		v.defMu.Unlock()
	}
	return out
}

// recordTarget writes target into q's record. Caller holds v.defMu.
func (r *Registry) recordTarget(v *VHost, q *queue, target []int32) error {
	key := queueKey(v.name, q.name)
	rec, ok := r.liveQueueRecord(key, q.id)
	if !ok {
		return errors.New("the queue's record is gone")
	}
	rec.Target = target
	return r.defs.Put(key, mustJSON(rec))
}

// liveQueueRecord is the stored record under key, if it is still queue
// id's.
func (r *Registry) liveQueueRecord(key, id string) (queueRecord, bool) {
	var rec queueRecord
	value, live := r.cfg.Cluster.Get(key)
	if !live || json.Unmarshal(value, &rec) != nil || rec.ID != id {
		return queueRecord{}, false
	}
	return rec, true
}

// followMembership brings q, a quorum queue already here, in line with
// its record's membership: a replica opened here if this node is to hold
// one, closed and deleted if it no longer is, and the replica told if it
// drives the change. Caller holds v.defMu.
func (v *VHost) followMembership(q *queue, rec queueRecord) {
	ms := &quorumMembership{Members: rec.Members, Target: rec.Target}
	q.membership.Store(ms)
	self := v.r.nodeID()
	m := q.quorum.Load()
	switch {
	case m == nil && ms.holds(self) && !q.crashed.Load():
		v.openQuorumReplica(q, rec)
	case m != nil && !ms.holds(self):
		v.dropQuorumReplica(q, m)
	case m != nil:
		m.wake()
	}
}

// dropQuorumReplica closes and deletes this node's replica of q, no
// longer a member: q stays, a placeholder that reaches the leader.
func (v *VHost) dropQuorumReplica(q *queue, m *quorumReplica) {
	if err := m.store.Delete(); err != nil {
		v.r.logger.Warn("mq: deleting a quorum queue's replica failed", "queue", q.name, "vhost", v.name, "err", err)
	}
	<-m.done
	q.quorum.Store(nil)
	q.mu.Lock()
	q.store = nil
	q.mu.Unlock()
	v.r.logger.Info("mq: quorum queue replica removed from this node", "queue", q.name, "vhost", v.name)
}

// wake tells run the membership changed.
func (m *quorumReplica) wake() {
	select {
	case m.retarget <- struct{}{}:
	default:
	}
}

// membershipRetry is how often the leader retries a membership step
// (a learner catching up, a change Raft dropped).
const membershipRetry = 250 * time.Millisecond

// memberLag is how many entries behind the leader a member may be and
// count as caught up: under load a replica is never exactly level.
const memberLag = 64

// stepMembership, on the leader (run's goroutine), takes the next step
// of a new queue's leadership towards its first member, or of its group
// towards the target of a change in progress. It reports whether a step
// remains (run tries again after membershipRetry).
func (m *quorumReplica) stepMembership() bool {
	ms := m.q.membership.Load()
	switch {
	case ms.Target != nil:
		m.stepTowards(ms.Target)
		return true
	case m.preferredPending(ms):
		m.handToPreferred(ms)
		return true
	}
	return false
}

// preferredPending reports whether the queue is new (nothing logged yet)
// and its first member, in contact, is not the one leading it: a declare
// waits for that too (run's placed).
func (m *quorumReplica) preferredPending(ms *quorumMembership) bool {
	if len(ms.Members) == 0 || m.store.HighWatermark() > 0 {
		return false
	}
	leader, _, _ := m.store.Leadership()
	preferred := ms.Members[0]
	return int32(leader) != preferred && m.q.r.peerUp(preferred)
}

// handToPreferred hands the leadership of a new queue to its first
// member once that one is caught up (run's goroutine, on the leader).
func (m *quorumReplica) handToPreferred(ms *quorumMembership) {
	gm := m.group.Membership()
	preferred := uint64(ms.Members[0])
	if m.caughtUp([]uint64{preferred}, gm.CaughtUp, uint64(m.q.r.nodeID())) != 0 && slices.Contains(gm.Voters, preferred) {
		m.group.TransferLeadership(preferred)
	}
}

// stepTowards takes the next step of the queue's group towards target: a
// learner added, promoted, a member removed (or leadership handed on
// first), or the target recorded as the members. Each step is proposed
// again until the group's configuration shows it.
func (m *quorumReplica) stepTowards(target []int32) {
	gm := m.group.Membership()
	self := uint64(m.q.r.nodeID())
	current := slices.Concat(gm.Voters, gm.Learners)
	var err error
	defer func() {
		if err != nil {
			m.q.r.logger.Debug("mq: a quorum queue membership step failed; trying again", "queue", m.q.name, "err", err)
		}
	}()
	for _, id := range target {
		if !slices.Contains(current, uint64(id)) {
			err = m.group.AddLearner(uint64(id))
			return
		}
	}
	for _, id := range gm.Learners {
		if !slices.Contains(target, int32(id)) {
			err = m.group.RemoveMember(id)
			return
		}
	}
	if len(gm.Learners) > 0 {
		if id := m.caughtUp(gm.Learners, gm.CaughtUp, self); id != 0 {
			err = m.group.Promote(id)
		}
		return // every new member votes before any old one goes
	}
	for _, id := range gm.Voters {
		switch {
		case slices.Contains(target, int32(id)):
			continue
		case id == self:
			if to := m.caughtUp(gm.Voters, gm.CaughtUp, self); to != 0 && slices.Contains(target, int32(to)) {
				m.group.TransferLeadership(to)
			}
		default:
			err = m.group.RemoveMember(id)
		}
		return
	}
	m.completeMembership(target)
}

// caughtUp is one of ids, not self, within memberLag of the leader and
// in contact; 0 if none.
func (m *quorumReplica) caughtUp(ids []uint64, caughtUp func(id, lag uint64) bool, self uint64) uint64 {
	for _, id := range ids {
		if id != self && caughtUp(id, memberLag) && m.q.r.peerUp(int32(id)) {
			return id
		}
	}
	return 0
}

// completeMembership records target as the queue's members, once the
// group's voters are target.
func (m *quorumReplica) completeMembership(target []int32) {
	q := m.q
	key := queueKey(q.vh.name, q.name)
	rec, ok := q.r.liveQueueRecord(key, q.id)
	if !ok || !slices.Equal(rec.Target, target) {
		return // deleted, or recorded already
	}
	rec.Members, rec.Target = target, nil
	if err := q.r.defs.Put(key, mustJSON(rec)); err != nil {
		q.r.logger.Warn("mq: recording a quorum queue's new members failed; retrying", "queue", q.name, "err", err)
		return
	}
	q.r.logger.Info("mq: quorum queue membership changed", "queue", q.name, "vhost", q.vh.name, "members", target)
}
