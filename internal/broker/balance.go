package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Preferred leaders (KIP-460 ElectLeaders, auto.leader.rebalance.enable).
//
// A partition's preferred leader is its first replica, and the first
// replicas are spread over the nodes (assignReplicas), so leaders are
// spread while every partition is led by its preferred replica. A node
// that goes down loses its leaderships, and Raft has no reason to give
// them back when it returns: after a rolling restart the node restarted
// last leads nothing. ElectLeaders moves a partition's leadership to its
// preferred replica on request, and each node's balancer does it for the
// partitions it leads every LeaderImbalanceCheck, as Kafka's controller
// does, once a node's share of partitions led elsewhere passes
// leaderImbalanceRatio. The move is Raft's leadership transfer: the
// leader brings the preferred replica up to date, then lets it campaign
// at once; nothing acknowledged is at risk, and the preferred replica must
// be in sync (in contact), and not shutting down (shutdown.go), for it to
// be tried.

// Errors of a preferred leader election.
var (
	ErrElectionNotNeeded           = errors.New("leader election not needed")
	ErrPreferredLeaderNotAvailable = errors.New("preferred leader not available")
	ErrEligibleLeadersNotAvailable = errors.New("eligible leaders not available")
)

// leaderImbalanceRatio is Kafka's leader.imbalance.per.broker.percentage
// (10 %): the share of the partitions preferring a node that may be led
// elsewhere before the balancer moves them back.
const leaderImbalanceRatio = 0.10

// transferRetry is how often a leadership transfer is asked again while
// it has not happened: Raft drops one the preferred replica does not
// complete within an election timeout (1 s).
const transferRetry = time.Second

// PreferredLeader is the replica the partition's leadership belongs with:
// its first (this node, on a single node).
func (p *Partition) PreferredLeader() int32 {
	replicas := p.Replicas()
	if len(replicas) == 0 {
		return p.broker.cfg.NodeID
	}
	return replicas[0]
}

// ElectPreferredLeader moves the partition's leadership to its preferred
// replica and waits until that replica leads, or fails with
// ErrRequestTimedOut once ctx ends. It fails with ErrElectionNotNeeded if
// the preferred replica leads already, ErrPreferredLeaderNotAvailable if
// it is not in sync or shutting down, or the partition has no leader to
// hand over from, and ErrEligibleLeadersNotAvailable if the partition is
// offline here.
func (p *Partition) ElectPreferredLeader(ctx context.Context) error {
	if err := p.Offline(); err != nil {
		return fmt.Errorf("%w: %s-%d is offline: %v", ErrEligibleLeadersNotAvailable, p.topic.name, p.index, err)
	}
	self, preferred := p.broker.cfg.NodeID, p.PreferredLeader()
	leader, _, isr := p.Leadership(self)
	switch {
	case leader == preferred:
		return fmt.Errorf("%w: %s-%d is led by its preferred replica %d", ErrElectionNotNeeded, p.topic.name, p.index, preferred)
	case leader < 0:
		return fmt.Errorf("%w: %s-%d has no leader yet to hand over from", ErrPreferredLeaderNotAvailable, p.topic.name, p.index)
	case !slices.Contains(isr, preferred):
		return fmt.Errorf("%w: preferred replica %d of %s-%d is not in sync", ErrPreferredLeaderNotAvailable, preferred, p.topic.name, p.index)
	}
	if err := p.preferredStopping(preferred); err != nil {
		return err
	}
	for {
		// Asked again after transferRetry, or as soon as the leadership
		// moves: a new leader (the preferred one, or not) is known from
		// this node's replica or, on a node holding none, from the
		// leader's record in the metadata log.
		seen := p.liveLeader()
		p.transferLeadership(ctx, leader, preferred)
		retry, cancel := context.WithTimeout(ctx, transferRetry)
		p.awaitLeaderChange(retry, seen)
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s-%d: leadership not handed to node %d in time", ErrRequestTimedOut, p.topic.name, p.index, preferred)
		}
		if leader, _, _ = p.Leadership(self); leader == preferred {
			return nil
		}
		// It may have begun a controlled shutdown meanwhile: asking again
		// would fight its hand-over until the timeout.
		if err := p.preferredStopping(preferred); err != nil {
			return err
		}
	}
}

// preferredStopping refuses an election of a preferred replica that is
// in a controlled shutdown.
func (p *Partition) preferredStopping(preferred int32) error {
	if !p.broker.ShuttingDown(preferred) {
		return nil
	}
	return fmt.Errorf("%w: preferred replica %d of %s-%d is shutting down", ErrPreferredLeaderNotAvailable, preferred, p.topic.name, p.index)
}

// transferLeadership asks the partition's leader to hand its leadership
// to node to: through its own replica if this node holds one (a follower
// passes the request on to the leader, as Raft does), else forwarded to
// the leader over the cluster's transport, a forward given up once the
// leadership moves (a leader that died does not answer; the next try
// asks the next one).
// A failure is left to the caller's next try.
func (p *Partition) transferLeadership(ctx context.Context, leader, to int32) {
	if p.raft != nil {
		p.raft.Group().TransferLeadership(uint64(to))
		return
	}
	if leader < 0 {
		return // no leader known yet: the next try may know one
	}
	data, _ := json.Marshal(partitionForward{TransferTo: to}) // plain fields: cannot fail
	ctx, cancel := context.WithTimeout(ctx, transferRetry)
	defer cancel()
	ctx, stop := p.whileLeads(ctx, leader)
	defer stop()
	if _, err := p.broker.cfg.Cluster.Forward(ctx, partitionGroup(p.topic.id, p.index), leader, data); err != nil && ctx.Err() == nil {
		p.broker.logger.Debug("forwarding a leadership transfer failed; retrying", "topic", p.topic.name,
			"partition", p.index, "leader", leader, "err", err)
	}
}

// balanceLoop moves leaderships back to preferred replicas every
// LeaderImbalanceCheck until ctx ends.
func (b *Broker) balanceLoop(ctx context.Context) {
	tick := time.NewTicker(b.cfg.LeaderImbalanceCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		b.balanceLeaders()
	}
}

// balanceLeaders hands each partition this node leads, and whose preferred
// replica is in sync and over its imbalance ratio, to that replica. It
// does not wait for the transfers: the next check sees how they went.
func (b *Broker) balanceLeaders() {
	self := b.cfg.NodeID
	type share struct{ preferring, ledElsewhere int }
	shares := map[int32]*share{}
	var mine []*Partition // led here, preferring another node in sync
	for _, t := range b.Topics() {
		for _, p := range t.Partitions() {
			if p.Offline() != nil {
				continue
			}
			preferred := p.PreferredLeader()
			s := shares[preferred]
			if s == nil {
				s = &share{}
				shares[preferred] = s
			}
			s.preferring++
			leader, _, isr := p.Leadership(self)
			if leader == preferred {
				continue
			}
			s.ledElsewhere++
			if leader == self && p.raft != nil && slices.Contains(isr, preferred) && !b.ShuttingDown(preferred) {
				mine = append(mine, p)
			}
		}
	}
	for _, p := range mine {
		preferred := p.PreferredLeader()
		if s := shares[preferred]; float64(s.ledElsewhere)/float64(s.preferring) > leaderImbalanceRatio {
			b.logger.Info("handing leadership to the preferred replica", "topic", p.topic.name, "partition", p.index, "to", preferred)
			p.raft.Group().TransferLeadership(uint64(preferred))
		}
	}
}
