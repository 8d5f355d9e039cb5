package txn

import (
	"fmt"

	"github.com/wharf-mq/wharf/internal/broker"
)

// The coordinator in a cluster moves with the leadership of its partition
// of __transaction_state, as in Kafka: the transactional ids of a
// partition are coordinated by the partition's leader alone.
// followLeadership watches the partitions (broker.LeadershipChanged).
// When this node becomes a partition's leader it waits until every entry
// of the earlier terms is committed, then rebuilds the partition's ids
// from the log (so every new leader rebuilds the same state) and serves
// them; the timeout sweep then finishes the transactions left committing
// or aborting and aborts those open past their timeout, as after a
// restart. When it stops leading it drops them: their requests are
// NOT_COORDINATOR and clients look for the coordinator again. A single
// node loads every partition at Open and serves them for good.

// followLeadership loads and drops partitions as their leadership moves,
// until Close.
func (c *Coordinator) followLeadership() {
	for {
		changed := c.b.LeadershipChanged()
		c.reconcileLeadership()
		select {
		case <-changed:
		case <-c.leadKick:
		case <-c.stop:
			return
		}
	}
}

// reconcileLeadership starts loading the partitions this node newly leads
// and drops those it no longer leads. Until __transaction_state exists
// (another node may create it) there is nothing to do.
func (c *Coordinator) reconcileLeadership() {
	c.storeMu.Lock()
	if c.store == nil {
		if s, err := openStore(c.b, c.cfg.Partitions, false); err == nil {
			c.store = s
		}
	}
	s := c.store
	c.storeMu.Unlock()
	if s == nil {
		return
	}
	for _, p := range s.parts() {
		term, leading := p.Leading()
		servedTerm, served, loading := s.loads.State(p.Index())
		switch {
		case loading:
			// Its load ends with a kick, and this runs again.
		case leading && (!served || servedTerm != term):
			c.takePartition(s, p, term)
		case !leading && served:
			c.dropPartition(s, p)
		}
	}
}

// takePartition drops what this node coordinated of p's ids (an earlier
// term's) and loads them in the background for term.
func (c *Coordinator) takePartition(s *stateStore, p *broker.Partition, term uint64) {
	c.mu.Lock()
	s.loads.StartLoading(p.Index())
	gone := c.removeIDsOf(s, p)
	c.mu.Unlock()
	c.fenceIDs(gone)
	c.leading.Go(func() {
		defer c.kickLeadership()
		err := p.AwaitLeadership(c.loadsCtx)
		var ids map[string]*txn
		if err == nil {
			ids = s.load([]*broker.Partition{p})
		}
		c.mu.Lock()
		now, leading := p.Leading()
		ok := err == nil && leading && now == term
		s.loads.DoneLoading(p.Index(), term, ok)
		if ok {
			for id, t := range ids {
				c.txns[id] = t
				t.mu.Lock()
				c.publish(t)
				t.mu.Unlock()
			}
		}
		c.mu.Unlock()
		if !ok {
			c.log.Info("transactional ids of a partition not loaded: leadership moved on", "partition", p.Index(), "term", term, "err", err)
			return
		}
		c.log.Info("coordinating the transactional ids of a partition", "partition", p.Index(), "term", term, "ids", len(ids))
	})
}

// dropPartition stops coordinating p's ids.
func (c *Coordinator) dropPartition(s *stateStore, p *broker.Partition) {
	c.mu.Lock()
	s.loads.Unserve(p.Index())
	gone := c.removeIDsOf(s, p)
	c.mu.Unlock()
	c.fenceIDs(gone)
	c.log.Info("no longer coordinating the transactional ids of a partition", "partition", p.Index(), "ids", len(gone))
}

// removeIDsOf takes p's ids out of the coordinator and returns them. c.mu
// must be held.
func (c *Coordinator) removeIDsOf(s *stateStore, p *broker.Partition) []*txn {
	var gone []*txn
	for id, t := range c.txns {
		if s.partitionFor(id) == p {
			gone = append(gone, t)
			delete(c.txns, id)
		}
	}
	return gone
}

// fenceIDs marks ids removed once no operation runs on them, and forgets
// what produce verification knew of them.
func (c *Coordinator) fenceIDs(ids []*txn) {
	for _, t := range ids {
		t.mu.Lock()
		t.removed = true
		c.unpublish(t.id)
		t.mu.Unlock()
	}
}

// kickLeadership makes followLeadership look at the partitions again.
func (c *Coordinator) kickLeadership() {
	select {
	case c.leadKick <- struct{}{}:
	default:
	}
}

// CoordinatorNode is the node that coordinates transactional id: this one
// (self) on a single node; in a cluster, the leader of the id's partition
// of __transaction_state, which it creates if there is none yet (as
// Kafka's FindCoordinator does). ErrCoordinatorNotAvailable while no
// leader is known.
func (c *Coordinator) CoordinatorNode(id string, self int32) (int32, error) {
	if !c.b.Clustered() {
		return self, c.Available(id)
	}
	s, err := c.stateStore()
	if err != nil {
		return -1, err
	}
	if err := s.usable(id); err != nil {
		return -1, err
	}
	p := s.partitionFor(id)
	leader, _, _ := p.Leadership(self)
	if leader < 0 {
		return -1, fmt.Errorf("%w: %s-%d has no leader", ErrCoordinatorNotAvailable, StateTopic, p.Index())
	}
	return leader, nil
}
