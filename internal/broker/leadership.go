package broker

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Partition leadership in a cluster.
//
// Raft tells the replicas of a partition who leads it; a node holding no
// replica would know nothing, yet Kafka clients expect every broker to
// answer Metadata for every partition. So, as KRaft's PartitionChangeRecord
// does, each node that becomes a partition's leader records it in the
// metadata log (a leaderRecord: leader and epoch, the Raft term), and
// every node applies it. The newest epoch wins, whatever order the
// records commit in. A replica answers from its own Raft group, which is
// fresher; a node without one answers from the record.
//
// The same changes wake whoever serves from a partition's leadership:
// the group and transaction coordinators load a partition's state when
// this node takes its leadership and drop it when it loses it
// (LeadershipChanged).

// leaderKeyPrefix marks the metadata records of partition leaders:
// "leader/<topic id>/<partition>".
const leaderKeyPrefix = "leader/"

// leaderRecord is who leads a partition, as its leader reported.
type leaderRecord struct {
	Topic     [16]byte `json:"topic"`
	Partition int32    `json:"partition"`
	Leader    int32    `json:"leader"`
	Epoch     int32    `json:"epoch"`
}

// partitionKey names a partition across renames: topic id and index.
type partitionKey struct {
	topic     [16]byte
	partition int32
}

func leaderKey(topic [16]byte, partition int32) string {
	return leaderKeyPrefix + hex.EncodeToString(topic[:]) + "/" + strconv.Itoa(int(partition))
}

// applyLeader applies a leader record: kept if its epoch is the newest,
// and its topic live (not a report that raced the topic's deletion, whose
// leaders the deletion dropped: forgetTopic).
func (st *metadataState) applyLeader(key string, value []byte) error {
	var r leaderRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return fmt.Errorf("metadata record %q: %w", key, err)
	}
	if !st.topicIDs[r.Topic] {
		return nil
	}
	k := partitionKey{r.Topic, r.Partition}
	if old, ok := st.leaders[k]; !ok || r.Epoch >= old.Epoch {
		st.leaders[k] = r
		st.setOrigin(key)
	}
	return nil
}

// reportedLeader is the partition's leader as the metadata log has it:
// leader -1 when no leader was ever recorded.
func (b *Broker) reportedLeader(t *Topic, partition int32) (leader, epoch int32) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	r, ok := b.state.leaders[partitionKey{t.id, partition}]
	if !ok {
		return -1, -1
	}
	return r.Leader, r.Epoch
}

// InContactWithController reports whether this node leads the metadata
// group or is in contact with the node that does (always, on a single
// node). Only then is its view of which nodes are down the cluster's: a
// Kafka broker is fenced by the controller, and a broker cut off from
// the controller keeps listing every broker it knew.
func (b *Broker) InContactWithController() bool {
	controller := b.Controller()
	return controller >= 0 && b.NodeUp(controller)
}

// LeadershipChanged returns a channel closed at the next change of
// leadership of any partition this node holds a replica of (never, on a
// single node, whose partitions are all led here for good).
func (b *Broker) LeadershipChanged() <-chan struct{} {
	b.leadersMu.Lock()
	defer b.leadersMu.Unlock()
	return b.leadersChanged
}

// partitionStateChanged hears, on the Raft host's loop, that a replica's
// term, leader or role changed: it wakes the leadership loop.
func (b *Broker) partitionStateChanged() {
	select {
	case b.leadersWake <- struct{}{}:
	default:
	}
}

// leadershipLoop wakes those waiting on LeadershipChanged and records
// each partition this node newly leads, until ctx ends.
func (b *Broker) leadershipLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.leadersWake:
		}
		b.leadersMu.Lock()
		close(b.leadersChanged)
		b.leadersChanged = make(chan struct{})
		b.leadersMu.Unlock()
		if err := b.reportLeaders(); err != nil {
			b.logger.Warn("recording partition leaders failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				b.partitionStateChanged()
			}
		}
	}
}

// reportLeaders records, in one metadata batch, every partition this node
// leads at a term the metadata log does not have yet.
func (b *Broker) reportLeaders() error {
	b.mu.RLock()
	topics := make([]*Topic, 0, len(b.topics))
	for _, t := range b.topics {
		topics = append(topics, t)
	}
	b.mu.RUnlock()
	var recs []keyValue
	for _, t := range topics {
		for _, p := range t.Partitions() {
			if p.raft == nil {
				continue
			}
			_, term, leading := p.raft.Leadership()
			if !leading {
				continue
			}
			if _, epoch := b.reportedLeader(t, p.index); int32(term) > epoch {
				r := leaderRecord{Topic: t.id, Partition: p.index, Leader: b.cfg.NodeID, Epoch: int32(term)}
				recs = append(recs, keyValue{leaderKey(t.id, p.index), r})
			}
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return b.meta.writeAll(recs)
}

// LeaderLoads is what a core that serves state rebuilt from partitions
// (the group and transaction coordinators) keeps of them in a cluster:
// the partitions it serves, by the term of this node's leadership it
// rebuilt their state in, and those being rebuilt. Safe for concurrent
// use.
type LeaderLoads struct {
	mu      sync.Mutex
	served  map[int32]uint64
	loading map[int32]bool
}

// NewLeaderLoads returns a LeaderLoads serving nothing.
func NewLeaderLoads() *LeaderLoads {
	return &LeaderLoads{served: map[int32]uint64{}, loading: map[int32]bool{}}
}

// State is partition's: the term it is served for, whether it is, and
// whether it is being loaded.
func (l *LeaderLoads) State(partition int32) (term uint64, served, loading bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	term, served = l.served[partition]
	return term, served, l.loading[partition]
}

// Loading reports whether partition is being loaded.
func (l *LeaderLoads) Loading(partition int32) bool {
	_, _, loading := l.State(partition)
	return loading
}

// StartLoading marks partition as being loaded, no longer served.
func (l *LeaderLoads) StartLoading(partition int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.served, partition)
	l.loading[partition] = true
}

// DoneLoading ends partition's load: served for term if ok.
func (l *LeaderLoads) DoneLoading(partition int32, term uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.loading, partition)
	if ok {
		l.served[partition] = term
	}
}

// Unserve stops serving partition.
func (l *LeaderLoads) Unserve(partition int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.served, partition)
}
