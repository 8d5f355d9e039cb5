package group

import (
	"time"
)

// load rebuilds the groups of partitions from __consumer_offsets and
// returns them, for the caller to serve. Records are applied in log
// order, so the last record for a key wins, as compaction would leave it.
// The groups of a partition that cannot be read to its end are dropped,
// whatever was read of them: they are unavailable until the partition is
// repaired (offsetsStore.available).
func (c *Coordinator) load(partitions []int32) map[string]*group {
	start := time.Now()
	l := loader{c: c, groups: map[string]*group{}}
	records := 0
	c.store.replay(partitions, replayHandler{
		record: func(r replayed) {
			records++
			if r.producerID >= 0 {
				l.txnOffset(r)
				return
			}
			l.apply(r.rec, r.ts)
		},
		marker: l.completeTxn,
		bad: func(offset int64, err error) {
			c.log.Warn("skipping a record of "+OffsetsTopic+" that does not decode", "offset", offset, "err", err)
		},
	})
	for _, partition := range partitions {
		if err := c.store.unreadableErr(partition); err != nil {
			c.log.Error("a partition of "+OffsetsTopic+" cannot be read: its groups are unavailable (COORDINATOR_NOT_AVAILABLE) until it is repaired",
				"partition", partition, "err", err)
		}
	}
	now := c.cfg.Now()
	for name, g := range l.groups {
		if c.store.unreadableErr(g.partition) != nil {
			delete(l.groups, name)
			continue
		}
		g.finishLoad(now)
		if g.holdsNothing() && len(g.pendingTxn) == 0 {
			delete(l.groups, name)
		}
	}
	c.log.Info("groups loaded", "partitions", len(partitions), "groups", len(l.groups), "records", records,
		"took", time.Since(start).Round(time.Millisecond))
	return l.groups
}

// loader is the groups being rebuilt by load, before anyone is served.
type loader struct {
	c      *Coordinator
	groups map[string]*group
}

// group returns the named group being loaded, made if it is new.
func (l *loader) group(name string) *group {
	g := l.groups[name]
	if g == nil {
		g = newGroup(l.c, name)
		l.groups[name] = g
	}
	return g
}

// apply applies one record to the groups being loaded.
func (l *loader) apply(d decodedRecord, ts time.Time) {
	if d.tombstone && l.groups[d.group] == nil {
		return
	}
	g := l.group(d.group)
	switch d.kind {
	case keyOffsetCommit:
		if d.tombstone {
			g.deleteOffset(d.topic, d.partition)
			return
		}
		g.setOffset(d.topic, d.partition, committedOffset{
			offset:      d.offset.Offset,
			leaderEpoch: d.offset.LeaderEpoch,
			metadata:    d.offset.Metadata,
			committedAt: time.UnixMilli(d.offset.CommitTimestamp),
		})
	case keyGroupMetadata:
		g.loadClassic(d, ts)
	case keyConsumerGroupMeta:
		g.loadConsumer(d, ts)
	}
}

// loadClassic sets a classic group's metadata from its latest record.
func (g *group) loadClassic(d decodedRecord, ts time.Time) {
	if d.tombstone {
		if g.kind == kindClassic {
			g.classic.init(ts)
			g.classic.protocolType, g.classic.generation = "", 0
		}
		return
	}
	v := d.classic
	g.kind = kindClassic
	g.consumer.init()
	cg := &g.classic
	cg.init(ts)
	cg.protocolType = v.ProtocolType
	cg.generation = v.Generation
	cg.protocol, cg.leader = "", ""
	if v.Protocol != nil {
		cg.protocol = *v.Protocol
	}
	if v.Leader != nil {
		cg.leader = *v.Leader
	}
	if v.CurrentStateTimestamp > 0 {
		cg.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for i, mv := range v.Members {
		m := &classicMember{
			id:               mv.MemberID,
			instanceID:       mv.InstanceID,
			clientID:         mv.ClientID,
			clientHost:       mv.ClientHost,
			sessionTimeout:   time.Duration(mv.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(mv.RebalanceTimeoutMillis) * time.Millisecond,
			protocols:        []Protocol{{Name: cg.protocol, Metadata: mv.Subscription}},
			assignment:       mv.Assignment,
			joinOrder:        uint64(i),
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		cg.members[m.id] = m
		if m.instanceID != nil {
			cg.static[*m.instanceID] = m.id
		}
	}
	cg.joinSeq = uint64(len(v.Members))
}

// loadConsumer sets a KIP-848 group's epoch from its latest record. Its
// members are not restored: they rejoin.
func (g *group) loadConsumer(d decodedRecord, ts time.Time) {
	if d.tombstone {
		if g.kind == kindConsumer {
			g.kind = kindClassic
			g.consumer.init()
		}
		return
	}
	g.kind = kindConsumer
	g.classic.init(ts)
	g.classic.protocolType, g.classic.generation = "", 0
	g.consumer.init()
	g.consumer.epoch, g.consumer.assignmentEpoch = d.epoch, d.epoch
	g.emptySince = ts
}

// finishLoad puts a loaded group into its running state: a classic group
// with members is stable and their sessions start now; an empty one's
// offsets age from when it became empty.
func (g *group) finishLoad(now time.Time) {
	if g.kind == kindConsumer {
		return
	}
	cg := &g.classic
	if len(cg.members) == 0 {
		cg.state = classicEmpty
		if cg.protocolType != "" || cg.generation > 0 {
			g.emptySince = cg.stateSince
		}
		return
	}
	cg.state = classicStable
	g.emptySince = time.Time{}
	for _, m := range cg.members {
		m.sessionDeadline = now.Add(m.sessionTimeout)
	}
}

// failWaiting answers every parked JoinGroup and SyncGroup with err.
func (g *group) failWaiting(err error) {
	for _, m := range g.classic.members {
		if m.joinReply != nil {
			m.joinReply(JoinResponse{Err: err, MemberID: m.id})
			m.joinReply = nil
		}
		if m.syncReply != nil {
			m.syncReply(SyncResponse{Err: err})
			m.syncReply = nil
		}
	}
}
