package node

import (
	"context"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
)

// Controlled shutdown (Kafka's controlled.shutdown.enable, on by default).
//
// Before a cluster node stops, it hands the leadership of every Raft
// group it leads to another voter of the group: partitions, those of the
// internal topics, the metadata group and quorum queues alike, as every
// one is a group of its host. It waits until it leads no group it could
// hand over, or ClusterConfig.ControlledShutdownTimeout passes, serving
// as before meanwhile: a client is answered NOT_LEADER_OR_FOLLOWER as
// each leadership leaves, and moves to the new leader at once instead of
// waiting an election timeout once the node is gone. It also marks
// itself as stopping (broker.BeginControlledShutdown), so that no other
// node's balancer hands it a leadership back, and no node stopping too
// is chosen to take one. A group with no other voter in contact (one
// replica, or the others down or stopping) stays led here until the
// node stops, as a Kafka partition whose other replicas are out of sync
// does; so the last node of a cluster to stop does so at once.

// handOffPoll is how often the hand-over looks at what this node still
// leads and asks again: Raft abandons a transfer that the chosen voter
// has not completed within an election timeout.
const handOffPoll = 50 * time.Millisecond

// handOffLag is how many entries behind this node's log a voter may be
// and be chosen before one closer: Raft brings the chosen voter level
// before it lets it campaign, and drops proposals meanwhile.
const handOffLag = 64

// handOffLeaderships hands every leadership of a cluster node over, as
// described above; it returns once none is left to hand over, or when
// the timeout or ctx ends.
func (n *Node) handOffLeaderships(ctx context.Context) {
	cc := n.cfg.Cluster
	if cc == nil || cc.ControlledShutdownTimeout <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cc.ControlledShutdownTimeout)
	defer cancel()
	start := time.Now()
	b := n.cores.broker
	b.BeginControlledShutdown()
	host := n.cores.cluster.host
	ho := &handOff{
		host:     host,
		eligible: func(node uint64) bool { return host.PeerUp(node) && !b.ShuttingDown(int32(node)) },
		heirs:    map[uint64]uint64{},
		load:     map[uint64]int{},
	}
	poll := time.NewTicker(handOffPoll)
	defer poll.Stop()
	for {
		leading, kept := ho.step()
		if leading == 0 {
			n.logger.Info("controlled shutdown: every leadership handed over", "moved", len(ho.heirs),
				"kept_without_a_voter_to_take_them", kept, "took", time.Since(start).Round(time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			n.logger.Warn("controlled shutdown timed out; stopping while leading groups", "leading", leading,
				"timeout", cc.ControlledShutdownTimeout)
			return
		case <-poll.C:
		}
	}
}

// handOff hands a host's leaderships to other voters, spreading them.
type handOff struct {
	host *raft.Host
	// eligible reports whether a node may take a leadership: in contact
	// and not stopping itself.
	eligible func(node uint64) bool
	heirs    map[uint64]uint64 // group → the voter it is being handed to
	load     map[uint64]int    // voter → groups handed to it
}

// step asks, for every group this node still leads, that its heir take
// it (again: asking twice is harmless), choosing a new heir where there
// is none or it is no longer eligible. It returns how many groups this
// node leads and can hand over, and how many it leads with no voter to
// take them.
func (o *handOff) step() (leading, kept int) {
	self := o.host.NodeID()
	for _, g := range o.host.Groups() {
		if g.Status().Leader != self {
			continue
		}
		to, chosen := o.heirs[g.ID()]
		if !chosen || !o.eligible(to) {
			if chosen {
				o.load[to]--
			}
			if to = o.heir(g); to == 0 {
				delete(o.heirs, g.ID())
				kept++
				continue
			}
			o.heirs[g.ID()] = to
			o.load[to]++
		}
		g.TransferLeadership(to)
		leading++
	}
	return leading, kept
}

// heir chooses the voter of g to hand it to, among the eligible ones:
// of those within handOffLag entries of this node's log, the one handed
// fewest groups so far; if none is, the closest. 0 if none is eligible.
func (o *handOff) heir(g *raft.Group) uint64 {
	self := o.host.NodeID()
	m := g.Membership()
	// better reports whether voter a is a better heir than voter c.
	better := func(a, c uint64) bool {
		nearA, nearC := m.CaughtUp(a, handOffLag), m.CaughtUp(c, handOffLag)
		switch {
		case nearA != nearC:
			return nearA
		case nearA && o.load[a] != o.load[c]:
			return o.load[a] < o.load[c]
		}
		return m.Match[a] > m.Match[c]
	}
	var best uint64
	for _, id := range m.Voters {
		if id != self && o.eligible(id) && (best == 0 || better(id, best)) {
			best = id
		}
	}
	return best
}
