package mq

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Quorum queue placement in a cluster (issue 14), as RabbitMQ 4 places
// them.
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
