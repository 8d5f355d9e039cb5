package group

// The coordinator in a cluster moves with the leadership of its partition
// of __consumer_offsets, as in Kafka: the groups of a partition are served
// by the partition's leader alone. followLeadership watches the
// partitions (broker.LeadershipChanged). When this node becomes a
// partition's leader it waits until every entry of the earlier terms is
// committed, then rebuilds the partition's groups from the log (the same
// records, in the same order, on every replica, so every new leader
// rebuilds the same state) and serves them; meanwhile their requests are
// COORDINATOR_LOAD_IN_PROGRESS. When it stops leading it drops them: their
// requests are NOT_COORDINATOR and clients look for the coordinator again.
// A single node loads every partition at Open and serves them for good.

// followLeadership loads and drops partitions as their leadership moves,
// until Close.
func (c *Coordinator) followLeadership() {
	for {
		changed := c.cfg.Broker.LeadershipChanged()
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
// and drops those it no longer leads.
func (c *Coordinator) reconcileLeadership() {
	for i, p := range c.store.parts() {
		partition := int32(i)
		term, leading := p.Leading()
		servedTerm, served, loading := c.store.loads.State(partition)
		switch {
		case loading:
			// Its load ends with a kick, and this runs again.
		case leading && (!served || servedTerm != term):
			c.takePartition(partition, term)
		case !leading && served:
			c.dropPartition(partition)
		}
	}
}

// takePartition drops what this node served of partition (an earlier
// term's groups) and loads its groups in the background for term.
func (c *Coordinator) takePartition(partition int32, term uint64) {
	c.mu.Lock()
	c.store.loads.StartLoading(partition)
	gone := c.removeGroupsOf(partition)
	c.mu.Unlock()
	fenceGroups(gone)
	c.leading.Go(func() {
		defer c.kickLeadership()
		p := c.store.parts()[partition]
		err := p.AwaitLeadership(c.loadsCtx)
		var groups map[string]*group
		if err == nil {
			groups = c.load([]int32{partition})
		}
		c.mu.Lock()
		now, leading := p.Leading()
		ok := err == nil && leading && now == term && !c.closed
		c.store.loads.DoneLoading(partition, term, ok)
		late := c.lateMarkers[partition]
		delete(c.lateMarkers, partition)
		if ok {
			for name, g := range groups {
				for _, o := range late {
					g.completeTxn(o.producerID, o.commit)
				}
				c.groups[name] = g
			}
		}
		c.mu.Unlock()
		if !ok {
			c.log.Info("groups of a partition not loaded: leadership moved on", "partition", partition, "term", term, "err", err)
			return
		}
		for _, g := range groups {
			g.mu.Lock()
			g.scheduleWake()
			g.mu.Unlock()
		}
		c.log.Info("coordinating the groups of a partition", "partition", partition, "term", term, "groups", len(groups))
	})
}

// dropPartition stops serving partition's groups.
func (c *Coordinator) dropPartition(partition int32) {
	c.mu.Lock()
	c.store.loads.Unserve(partition)
	gone := c.removeGroupsOf(partition)
	c.mu.Unlock()
	fenceGroups(gone)
	c.log.Info("no longer coordinating the groups of a partition", "partition", partition, "groups", len(gone))
}

// removeGroupsOf takes partition's groups out of the coordinator and
// returns them. c.mu must be held.
func (c *Coordinator) removeGroupsOf(partition int32) []*group {
	var gone []*group
	for name, g := range c.groups {
		if g.partition == partition {
			gone = append(gone, g)
			delete(c.groups, name)
		}
	}
	return gone
}

// fenceGroups marks groups removed once no request runs on them (a
// request holding one finishes its write first) and answers their parked
// joins and syncs NOT_COORDINATOR.
func fenceGroups(groups []*group) {
	for _, g := range groups {
		g.mu.Lock()
		g.removed = true
		g.failWaiting(ErrNotCoordinator)
		g.mu.Unlock()
	}
}

// kickLeadership makes followLeadership look at the partitions again.
func (c *Coordinator) kickLeadership() {
	select {
	case c.leadKick <- struct{}{}:
	default:
	}
}
