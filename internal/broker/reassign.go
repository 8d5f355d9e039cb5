package broker

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Partition reassignment (Kafka's AlterPartitionReassignments), in a
// cluster.
//
// A reassignment is a record in the metadata log naming the partition's
// target replicas. Every node applies it; a node in the target that holds
// no replica yet opens an empty one, which the partition's leader fills
// (Raft's snapshot: the partition's log from its start). The leader
// (membershipLoop) then moves the partition's Raft group one member at a
// time (raft/membership.go): each new node joins as a learner, is
// promoted once caught up, and only then is each node outside the target
// removed, the leader handing its leadership to a target replica first
// if it is to go. When the group's voters are the target, the leader
// ends the reassignment with a record that gives the partition its new
// replicas (applied to the topic's replicas in log order, so partitions
// of one topic finishing at once do not overwrite each other); nodes no
// longer named close and delete their replica. At every step a majority of the current voters holds
// every committed record, so produce (acks=all) goes on throughout and
// nothing acknowledged is lost. Cancelling reassigns the partition back
// to the replicas it had.

const reassignKeyPrefix = "reassign/"

// reassignRecord is a reassignment in progress, or, Done, its end: the
// partition's replicas are Target from then on.
type reassignRecord struct {
	Topic     string   `json:"topic"`
	TopicID   [16]byte `json:"topic_id"`
	Partition int32    `json:"partition"`
	Target    []int32  `json:"target"`
	Done      bool     `json:"done,omitempty"`
}

func reassignKey(topicID [16]byte, partition int32) string {
	return reassignKeyPrefix + hex.EncodeToString(topicID[:]) + "/" + strconv.Itoa(int(partition))
}

// ErrNoReassignmentInProgress is a cancellation with nothing to cancel.
var ErrNoReassignmentInProgress = errors.New("no reassignment in progress")

func (st *metadataState) applyReassignment(key string, value []byte) error {
	var r reassignRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return fmt.Errorf("metadata record %q: %w", key, err)
	}
	k := partitionKey{topic: r.TopicID, partition: r.Partition}
	if r.Done {
		delete(st.reassignments, k)
		st.dropOrigin(key)
		if t, ok := st.topics[r.Topic]; ok && t.ID == r.TopicID && int(r.Partition) < len(t.Replicas) {
			t.Replicas = slices.Clone(t.Replicas) // the old record's slice may be in use
			t.Replicas[r.Partition] = r.Target
			st.topics[r.Topic] = t
			st.setOrigin(replicasPiece(r.TopicID, r.Partition))
		}
		return nil
	}
	if !st.topicIDs[r.TopicID] {
		return nil // it raced the topic's deletion, which dropped its reassignments
	}
	if st.reassignments == nil {
		st.reassignments = map[partitionKey]reassignRecord{}
	}
	st.reassignments[k] = r
	st.setOrigin(key)
	return nil
}

// Reassignment is a partition's reassignment in progress.
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32 // the replicas it has
	Target    []int32 // the replicas it moves to
}

// Reassign starts moving partition of topic to replicas (nil: cancel the
// reassignment in progress, back to the replicas it had). The replicas
// must be distinct nodes of the cluster; the caller checks the rest.
func (b *Broker) Reassign(topic string, partition int32, replicas []int32) error {
	t, err := b.Topic(topic)
	if err != nil {
		return err
	}
	p, err := t.Partition(partition)
	if err != nil {
		return err
	}
	nodes := b.ClusterNodes()
	for _, id := range replicas {
		if _, ok := nodes[id]; !ok {
			return fmt.Errorf("%w: The manual partition assignment includes broker %d, but no such broker is registered.", ErrUnknownNode, id)
		}
	}
	k := partitionKey{topic: t.id, partition: partition}
	b.mu.RLock()
	_, inProgress := b.state.reassignments[k]
	b.mu.RUnlock()
	current := p.Replicas()
	switch {
	case replicas == nil && !inProgress:
		return fmt.Errorf("%w: No ongoing reassignment for topic partition %s-%d", ErrNoReassignmentInProgress, topic, partition)
	case replicas == nil:
		replicas = current
	case !inProgress && slices.Equal(replicas, current):
		return nil
	}
	return b.meta.write(reassignKey(t.id, partition), reassignRecord{Topic: topic, TopicID: t.id, Partition: partition, Target: replicas})
}

// Reassignments lists the reassignments in progress.
func (b *Broker) Reassignments() []Reassignment {
	b.mu.RLock()
	recs := slices.Collect(maps.Values(b.state.reassignments))
	b.mu.RUnlock()
	var out []Reassignment
	for _, r := range recs {
		if p := b.reassignedPartition(r); p != nil {
			out = append(out, Reassignment{Topic: r.Topic, Partition: r.Partition, Replicas: p.Replicas(), Target: r.Target})
		}
	}
	slices.SortFunc(out, func(x, y Reassignment) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return out
}

// reassignedPartition is the partition r moves, nil if its topic is gone.
func (b *Broker) reassignedPartition(r reassignRecord) *Partition {
	t, err := b.Topic(r.Topic)
	if err != nil || t.id != r.TopicID {
		return nil
	}
	p, err := t.Partition(r.Partition)
	if err != nil {
		return nil
	}
	return p
}

// driveReassignments, on every node, opens the replicas this node is to
// hold, and takes one step of each reassigned partition this node leads.
func (b *Broker) driveReassignments() {
	b.mu.RLock()
	recs := slices.Collect(maps.Values(b.state.reassignments))
	b.mu.RUnlock()
	for _, r := range recs {
		p := b.reassignedPartition(r)
		switch {
		case p == nil:
		case p.remote && slices.Contains(r.Target, b.cfg.NodeID):
			b.reopenPartition(p, p.Replicas(), true)
		case p.raft != nil:
			if _, _, leading := p.raft.Leadership(); leading {
				b.stepReassignment(p, r)
			}
		}
	}
}

// stepReassignment takes the next step of r on p's leader: a learner
// added, promoted, a member removed (or leadership handed on first), or
// the reassignment recorded as done.
func (b *Broker) stepReassignment(p *Partition, r reassignRecord) {
	g := p.raft.Group()
	m := g.Membership()
	self := uint64(b.cfg.NodeID)
	members := slices.Concat(m.Voters, m.Learners)
	var err error
	for _, id := range r.Target {
		if !slices.Contains(members, uint64(id)) {
			err = g.AddLearner(uint64(id))
			b.logStep(err, "reassignment: adding a learner", "topic", r.Topic, "partition", r.Partition, "node", id)
			return
		}
	}
	for _, id := range m.Learners {
		if !slices.Contains(r.Target, int32(id)) {
			err = g.RemoveMember(id)
			b.logStep(err, "reassignment: removing a learner", "topic", r.Topic, "partition", r.Partition, "node", id)
			return
		}
	}
	if len(m.Learners) > 0 {
		if id := b.caughtUpLearner(m, r.Target); id != 0 {
			err = g.Promote(id)
			b.logStep(err, "reassignment: promoting a learner", "topic", r.Topic, "partition", r.Partition, "node", id)
		}
		return // every new replica votes before any old one goes
	}
	for _, id := range m.Voters {
		if slices.Contains(r.Target, int32(id)) {
			continue
		}
		if id == self {
			if to := b.caughtUpVoter(m, self, r.Target); to != 0 {
				g.TransferLeadership(to)
			}
			return
		}
		err = g.RemoveMember(id)
		b.logStep(err, "reassignment: removing a replica", "topic", r.Topic, "partition", r.Partition, "node", id)
		return
	}
	if err := b.completeReassignment(r); err != nil {
		b.logger.Warn("recording a finished reassignment failed; retrying", "topic", r.Topic, "partition", r.Partition, "err", err)
	}
}

// completeReassignment records the end of r: p's replicas are its
// target from then on.
func (b *Broker) completeReassignment(r reassignRecord) error {
	r.Done = true
	if err := b.meta.write(reassignKey(r.TopicID, r.Partition), r); err != nil {
		return err
	}
	b.logger.Info("reassignment done", "topic", r.Topic, "partition", r.Partition, "replicas", r.Target)
	return nil
}

// reassignmentApplied brings the partition of a reassignment that ended
// (value, a reassignRecord) in line with its new replicas.
func (b *Broker) reassignmentApplied(value []byte) {
	var r reassignRecord
	if json.Unmarshal(value, &r) != nil || !r.Done {
		return
	}
	b.mu.RLock()
	rec, live := b.state.topics[r.Topic]
	t := b.topics[r.Topic]
	b.mu.RUnlock()
	if live && t != nil && t.id == r.TopicID {
		b.reconcileReplicas(t, rec)
	}
}

// reconcileReplicas brings t's partitions in line with the replicas rec
// names: a partition that keeps its replica
// here only learns its new replicas; one whose replica here is no longer
// named is closed and deleted; one this node now holds is opened (if
// the reassignment had not opened it already).
func (b *Broker) reconcileReplicas(t *Topic, rec topicRecord) {
	for i, p := range t.Partitions() {
		if i >= len(rec.Replicas) || slices.Equal(p.Replicas(), rec.Replicas[i]) {
			continue
		}
		replicas := rec.Replicas[i]
		here := slices.Contains(replicas, b.cfg.NodeID)
		if here && !p.remote {
			p.replicas.Store(&replicas)
			continue
		}
		// A replica opened here now joins the partition's existing group.
		b.reopenPartition(p, replicas, here)
	}
}

// reopenPartition puts in p's place the partition opened anew with
// replicas (joining: openClusterPartition), unless another path replaced
// p first: that one opened the replica's directory already.
func (b *Broker) reopenPartition(p *Partition, replicas []int32, joining bool) {
	b.replaceMu.Lock()
	defer b.replaceMu.Unlock()
	if current, err := p.topic.Partition(p.index); err != nil || current != p {
		return
	}
	b.replacePartition(p, b.openClusterPartition(p.topic, p.index, replicas, p.topic.currentConfig().logConfig(), joining))
}

// replacePartition puts np in old's place in its topic, and closes and
// deletes old's replica here, if it had one.
func (b *Broker) replacePartition(old, np *Partition) {
	t := old.topic
	t.mu.Lock()
	if int(old.index) < len(t.partitions) && t.partitions[old.index] == old {
		// A new slice: Partitions hands the old one to readers.
		parts := slices.Clone(t.partitions)
		parts[old.index] = np
		t.partitions = parts
	}
	t.mu.Unlock()
	if old.log != nil && old.log != np.log {
		if err := old.raft.Delete(); err != nil {
			b.logger.Warn("deleting a partition's replica failed", "dir", old.dir, "err", err)
		}
	}
	old.wakeWaiters()
	b.partitionStateChanged()
}
