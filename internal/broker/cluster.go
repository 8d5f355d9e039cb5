package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// A broker in a cluster (issue 13, step 2).
//
// The metadata log is the replica of the cluster's metadata group, a Raft
// group over every node: any node writes to it (replica.RaftLog.Propose
// forwards to the leader), and every node applies what is committed, in
// order, in its apply loop: topics appear, change and go, partitions are
// opened where this node is one of their replicas, brokers register. So
// in a cluster an admin call writes its record and waits for its own
// node to have applied it: the in-memory change is the apply loop's,
// the same on every node. Each partition's log is the replica of its own
// Raft group over the partition's replicas (partitionGroup); a partition
// this node is no replica of has no log here and answers
// NOT_LEADER_OR_FOLLOWER, as do the replicas that do not lead.
//
// Every node knows every partition's leader (leadership.go), and the
// group and transaction coordinators follow the leadership of their
// internal partitions (internal/group and internal/txn, leadership.go).
// Leaderships go back to the partitions' preferred replicas on request
// (ElectLeaders) and by each node's balancer (balance.go). Nodes join and
// leave, and partitions move between them, through the metadata log and
// Raft membership changes (membership.go, reassign.go).

// ClusterConfig makes the broker one node of a cluster.
type ClusterConfig struct {
	// Nodes are the ids of the nodes the cluster started with (the
	// metadata group's first voters) or, on a node that joined, those it
	// was told of, this one (Config.NodeID) included; NodeAddrs their
	// cluster addresses. Nodes joined or removed later are in the
	// metadata log (membership.go).
	Nodes     []int32
	NodeAddrs map[int32]string
	// SetPeer tells the transport where a node joined later listens.
	SetPeer func(node int32, addr string)
	// OpenMetadataLog opens this node's replica of the metadata group in
	// dir, with cfg and replica.RaftOptions.WholeSnapshots (the log is
	// compacted by what apply decided, which only a replay from its start
	// gives back: metadata_origins.go).
	OpenMetadataLog func(dir string, cfg replica.Config) (*replica.RaftLog, error)
	// OpenPartitionLog opens this node's replica of the partition group
	// in dir, whose members are replicas; stateChanged is called (without
	// blocking) whenever the group's term, leader or role changes.
	OpenPartitionLog func(dir string, group uint64, replicas []int32, cfg replica.Config, stateChanged func()) (*replica.RaftLog, error)
	// PeerUp reports whether this node heard from node lately.
	PeerUp func(node int32) bool
	// Forward sends data to node, the leader of group, which hands it to
	// the group's forward handler, and returns its answer.
	Forward func(ctx context.Context, group uint64, node int32, data []byte) (int64, error)
	// Call sends data to the owner of node's replica of group and
	// returns its answer: a node asks the others whether it was removed
	// (fencing.go).
	Call func(ctx context.Context, group uint64, node int32, data []byte) ([]byte, error)
	// WriteTimeout bounds a metadata write: no quorum for that long fails
	// it (30 s).
	WriteTimeout time.Duration
	// OpenContext ends Open's wait for a quorum of the metadata group
	// (catchUpMetadata), which has no limit otherwise: the operator's
	// SIGTERM. Nil: it never ends.
	OpenContext context.Context
	// JoinedMetadataEnd is, on a node joining the cluster now, the end of
	// the metadata log the member that let it in had applied: Open waits
	// until this node's replica holds it, so that it knows every topic.
	JoinedMetadataEnd int64
}

// BrokerInfo is a broker as it registered: its id and the address its
// Kafka clients reach it at, and whether it is in a controlled shutdown
// (shutdown.go).
type BrokerInfo struct {
	NodeID       int32  `json:"node_id"`
	Host         string `json:"host"`
	Port         int32  `json:"port"`
	ShuttingDown bool   `json:"shutting_down,omitempty"`
}

// Metadata records only a cluster writes.
const (
	brokerKeyPrefix    = "broker/"
	producerIDBlockKey = "producer-id-block"
)

// producerIDBlockRecord is a node's block of producer ids, [Start, End),
// under producerIDBlockKey/<node>. Applying it grants the block if Start
// is at or above the end of every block asked for before, and refuses it
// otherwise (another node's request came first: the node asks again above
// it); either way the end of the blocks becomes at least End. So the end
// is the largest End of all the records. Compaction keeps each node's
// granted block and the record that raised the end last, a refused one
// rewritten with Start -1 so that it is refused again wherever it stands
// (applyCluster, metadata_origins.go).
//
// Logs written before hold requests under producerIDBlockKey itself:
// Size ids after every block granted before, a running sum that only the
// whole log gives; compaction rewrites a kept one as the absolute block
// it was granted.
type producerIDBlockRecord struct {
	Node  int32 `json:"node"`
	Start int64 `json:"start,omitempty"`
	End   int64 `json:"end,omitempty"`
	Size  int64 `json:"size,omitempty"` // the old request
}

// producerIDBlockRequest is the record by which node asks for the block
// [start, start+size).
func producerIDBlockRequest(node int32, start, size int64) keyValue {
	return keyValue{producerIDBlockKey + "/" + strconv.Itoa(int(node)),
		producerIDBlockRecord{Node: node, Start: start, End: start + size}}
}

// applyCluster applies the records only a cluster writes.
func (st *metadataState) applyCluster(key string, value []byte) error {
	if strings.HasPrefix(key, producerIDBlockKey) {
		var r producerIDBlockRecord
		if err := json.Unmarshal(value, &r); err != nil {
			return fmt.Errorf("metadata record %q: %w", key, err)
		}
		if key == producerIDBlockKey { // the old request
			r.Start, r.End = st.producerIDBlockEnd, st.producerIDBlockEnd+r.Size
		}
		granted, raised := r.Start >= st.producerIDBlockEnd, r.End > st.producerIDBlockEnd
		if granted {
			st.producerBlocks[r.Node] = [2]int64{r.Start, r.End}
		}
		st.producerIDBlockEnd = max(st.producerIDBlockEnd, r.End)
		if st.origins != nil && (granted || raised) {
			// Kept as an absolute block under the node's key; one
			// refused only raised the end, and is refused again at any
			// place (Start -1).
			if !granted {
				r.Start = -1
			}
			v, err := json.Marshal(producerIDBlockRecord{Node: r.Node, Start: r.Start, End: r.End})
			if err != nil {
				return err
			}
			as := record.Record{Key: []byte(producerIDBlockKey + "/" + strconv.Itoa(int(r.Node))), Value: v}
			if granted {
				st.setOriginAs(string(as.Key), as)
			}
			if raised {
				st.setOriginAs(producerIDEndPiece, as)
			}
		}
		return nil
	}
	var r BrokerInfo
	if err := json.Unmarshal(value, &r); err != nil {
		return fmt.Errorf("metadata record %q: %w", key, err)
	}
	if st.nodes[r.NodeID].Removed {
		// A removed node's process that kept running, or came back
		// before it saw its removal, registers no more: KRaft fences an
		// unregistered broker.
		return nil
	}
	st.brokers[r.NodeID] = r
	st.setOrigin(key)
	return nil
}

// ErrNotLeader is a partition request to a node that does not lead the
// partition (Kafka's NOT_LEADER_OR_FOLLOWER): the client should refresh
// its metadata and go to the leader.
var ErrNotLeader = errors.New("not the leader of the partition")

// ErrNotEnoughReplicas is an acks=all produce to a partition with fewer
// replicas in contact than min.insync.replicas.
var ErrNotEnoughReplicas = errors.New("not enough in-sync replicas")

// ErrInvalidReplicationFactor is a replication factor the cluster cannot
// give: above its node count.
var ErrInvalidReplicationFactor = errors.New("invalid replication factor")

// Clustered reports whether the broker is a node of a cluster.
func (b *Broker) Clustered() bool { return b.cfg.Cluster != nil }

// nodeIDs lists the cluster's nodes in id order (this one alone on a
// single node).
func (b *Broker) nodeIDs() []int32 {
	return slices.Sorted(maps.Keys(b.ClusterNodes()))
}

// Brokers lists the registered brokers in id order (in a cluster; none
// on a single node).
func (b *Broker) Brokers() []BrokerInfo {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := slices.Collect(maps.Values(b.state.brokers))
	slices.SortFunc(out, func(x, y BrokerInfo) int { return int(x.NodeID - y.NodeID) })
	return out
}

// NodeUp reports whether this node is in contact with node (always, for
// itself).
func (b *Broker) NodeUp(node int32) bool {
	return b.cfg.Cluster == nil || b.cfg.Cluster.PeerUp(node)
}

// Controller is the node leading the metadata group, -1 while none does
// (a single node is its own controller).
func (b *Broker) Controller() int32 {
	if b.meta.raft == nil {
		return b.cfg.NodeID
	}
	leader, _, _ := b.meta.raft.Leadership()
	if leader == 0 {
		return -1
	}
	return int32(leader)
}

// NodeCount is how many nodes the cluster has (1 on a single node).
func (b *Broker) NodeCount() int { return len(b.nodeIDs()) }

// Register records this broker's Kafka address in the metadata log, in
// the background until it is applied (a cluster has no quorum until
// enough nodes are up), the controlled shutdown begins (shutdown.go), or
// the other nodes say this node was removed, which fences it
// (fencing.go). A single node has nothing to register.
func (b *Broker) Register(host string, port int32) {
	if b.meta.raft == nil {
		return
	}
	info := BrokerInfo{NodeID: b.cfg.NodeID, Host: host, Port: port}
	b.regMu.Lock()
	b.registration = &info
	b.regMu.Unlock()
	b.bg.Go(func() {
		for {
			err := b.writeRegistration(info)
			switch {
			case err == nil:
				b.registrationApplied(info)
				return
			case errors.Is(err, errShutdownBegun), errors.Is(err, ErrNodeRemoved):
				return
			case b.othersSayRemoved(b.meta.ctx):
				b.logger.Error("this node's registration failed: the other nodes say it was removed from the cluster", "err", err)
				b.fenceOutOfGroup()
				return
			}
			select {
			case <-b.stop:
				return
			case <-time.After(time.Second):
				b.logger.Warn("broker registration failed; retrying", "err", err)
			}
		}
	})
}

// writeRegistration writes info unless the controlled shutdown has
// begun. It holds regMu throughout, so that the shutdown's mark, written
// under regMu too, comes after any registration, never before one that
// would clear it.
func (b *Broker) writeRegistration(info BrokerInfo) error {
	b.regMu.Lock()
	defer b.regMu.Unlock()
	if b.shutdownBegun.Load() {
		return errShutdownBegun
	}
	return b.meta.write(brokerKey(info.NodeID), info)
}

// registrationApplied logs what applying this node's registration did:
// nothing, if the metadata records the node as removed (applyCluster),
// whose removal applied before it has fenced the node.
func (b *Broker) registrationApplied(info BrokerInfo) {
	b.mu.RLock()
	_, listed := b.state.brokers[info.NodeID]
	b.mu.RUnlock()
	if !listed {
		b.logger.Error("broker registration ignored: the cluster records this node as removed", "node", info.NodeID)
		return
	}
	b.logger.Info("broker registered", "node", info.NodeID, "host", info.Host, "port", info.Port)
}

// brokerKey is the metadata key of node's registration.
func brokerKey(node int32) string { return brokerKeyPrefix + strconv.Itoa(int(node)) }

// propose writes batch to the metadata group from this node and waits
// until this node has applied it.
func (m *metadataLog) propose(batch []byte) error {
	if err := m.removed(); err != nil {
		return err // a removed node writes no more
	}
	ctx, cancel := context.WithTimeout(m.ctx, m.writeTimeout)
	defer cancel()
	offset, err := m.raft.Propose(ctx, batch)
	if err == nil {
		err = m.applied(ctx, offset)
	}
	if cause := context.Cause(m.ctx); err != nil && errors.Is(cause, ErrNodeRemoved) {
		return cause
	}
	if err != nil {
		return fmt.Errorf("%w: write metadata: %v", ErrStorage, err)
	}
	return nil
}

// startApplying replays the committed metadata (loaded) and starts the
// loop that applies what is committed from then on.
func (b *Broker) startApplying() {
	b.meta.applied, b.meta.removed = b.waitApplied, b.RemovedErr
	b.meta.ctx, b.stopCluster = context.WithCancelCause(context.Background())
	b.applyChanged = make(chan struct{})
	b.meta.raft.SetCallHandler(b.answerMetadataCall)
	b.meta.raft.SetForwardHandler(b.metadataForwarded)
	b.bg.Go(func() { b.applyLoop(b.meta.ctx) })
	b.bg.Go(func() { b.removalWatch(b.meta.ctx) })
	b.bg.Go(func() { b.leadershipLoop(b.meta.ctx) })
	if *b.cfg.AutoLeaderRebalance {
		b.bg.Go(func() { b.balanceLoop(b.meta.ctx) })
	}
	b.startMembership(b.meta.ctx)
}

// applyLoop applies the metadata log's committed records as they come,
// until ctx ends. After a snapshot install, which replaced the log with
// the leader's (compacted) one, it replays the whole log instead
// (rebuildState).
func (b *Broker) applyLoop(ctx context.Context) {
	for {
		b.mu.RLock()
		next, seen := b.appliedEnd, b.installsSeen
		b.mu.RUnlock()
		if b.meta.raft.Installs() != seen {
			if err := b.rebuildState(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				b.logger.Error("replaying the metadata log after a snapshot install failed; retrying", "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
			continue
		}
		if err := b.meta.raft.WaitHighWatermark(ctx, next); err != nil {
			return
		}
		end, err := readRecords(b.meta.log.Read, next, b.meta.log.HighWatermark(), func(h record.Header, recs []record.Record) error {
			if b.meta.raft.Installs() != seen {
				return errLogReplaced // what was read may be the new log's, compacted: not applied
			}
			for _, r := range recs {
				if err := b.applyRecord(r); err != nil {
					return err
				}
			}
			return nil
		})
		if errors.Is(err, errLogReplaced) || err != nil && b.meta.raft.Installs() != seen {
			continue // the log was replaced under the read: replayed whole next
		}
		if err != nil {
			b.logger.Error("applying the metadata log failed; retrying", "offset", next, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		b.mu.Lock()
		b.appliedEnd = end
		close(b.applyChanged)
		b.applyChanged = make(chan struct{})
		b.mu.Unlock()
	}
}

// errLogReplaced stops the apply loop's read when a snapshot install
// replaced the metadata log under it.
var errLogReplaced = errors.New("the metadata log was replaced by a snapshot")

// rebuildState replaces the applied metadata with a replay of the whole
// log, once the snapshot install under way (if any) is done, and brings
// the topics and definitions in line with it. The log a snapshot installs
// may be compacted, which only a replay from its start gives back right:
// applied on top of this node's state, it would miss the deletions of
// keys this node holds whose tombstones the leader's cleaner dropped.
func (b *Broker) rebuildState(ctx context.Context) error {
	changed := b.meta.raft.Changed()
	seq := b.meta.raft.Installs()
	if seq%2 == 1 { // the install is under way, or failed and may never end
		select {
		case <-changed:
			return nil
		case <-ctx.Done():
			return ctx.Err() // the loop ends: it would come back here at once
		}
	}
	st, err := b.meta.loadOneVersion()
	if err != nil {
		return err
	}
	if b.meta.raft.Installs() != seq {
		return nil // another install meanwhile: the loop comes back
	}
	b.mu.Lock()
	old := b.state
	// The ids of deleted topics the replay lost (tombstones compacted
	// away) still name leftover directories (dirs.go): kept.
	maps.Copy(old.deletedTopics, st.deletedTopics)
	st.deletedTopics = old.deletedTopics
	b.state, b.appliedEnd, b.installsSeen = st, st.end, seq
	close(b.applyChanged)
	b.applyChanged = make(chan struct{})
	b.mu.Unlock()
	b.logger.Info("replayed the metadata log a snapshot installed", "end", st.end)
	for _, name := range slices.Sorted(maps.Keys(mapUnion(old.topics, st.topics))) {
		b.reconcileTopic(name)
	}
	for _, key := range slices.Sorted(maps.Keys(mapUnion(old.definitions, st.definitions))) {
		was, had := old.definitions[key]
		now, has := st.definitions[key]
		if had != has || !bytes.Equal(was, now) {
			b.defs.applied(key, now)
		}
	}
	b.nodeApplied()
	return nil
}

// mapUnion is a map with the keys of both.
func mapUnion[K comparable, V any](a, c map[K]V) map[K]struct{} {
	u := make(map[K]struct{}, len(a)+len(c))
	for k := range a {
		u[k] = struct{}{}
	}
	for k := range c {
		u[k] = struct{}{}
	}
	return u
}

// waitApplied waits until this node applied the metadata record at
// offset.
func (b *Broker) waitApplied(ctx context.Context, offset int64) error {
	for {
		b.mu.RLock()
		done, changed := b.appliedEnd > offset, b.applyChanged
		b.mu.RUnlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-b.stop:
			return ErrClosed
		}
	}
}

// applyRecord applies one committed metadata record: to the state, then
// to the topics and definitions it changes.
func (b *Broker) applyRecord(r record.Record) error {
	key, value := string(r.Key), r.Value
	b.mu.Lock()
	err := b.state.apply(r)
	if strings.HasPrefix(key, definitionPrefix) {
		value = b.state.definitions[key[len(definitionPrefix):]] // as applied: a PutIf may have been ignored
	}
	b.mu.Unlock()
	if err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(key, "topic/"):
		b.reconcileTopic(strings.TrimPrefix(key, "topic/"))
	case strings.HasPrefix(key, definitionPrefix):
		b.defs.applied(key[len(definitionPrefix):], value)
	case strings.HasPrefix(key, reassignKeyPrefix):
		b.reassignmentApplied(value)
	case strings.HasPrefix(key, nodeKeyPrefix):
		b.nodeApplied()
	}
	return nil
}

// reconcileTopic makes the topic named what the metadata says: created,
// grown, reconfigured or gone.
func (b *Broker) reconcileTopic(name string) {
	b.mu.RLock()
	rec, live := b.state.topics[name]
	t := b.topics[name]
	b.mu.RUnlock()
	if t != nil && (!live || t.id != rec.ID) {
		b.mu.Lock()
		b.removeTopicLocked(t)
		b.mu.Unlock()
		for _, p := range t.Partitions() {
			if p.log != nil {
				if err := p.log.Delete(); err != nil {
					b.logger.Warn("deleting a partition's replica failed", "dir", p.dir, "err", err)
				}
			}
			p.wakeWaiters()
		}
		b.logger.Info("topic deleted", "topic", name)
		t = nil
	}
	if !live {
		return
	}
	if t == nil {
		t = b.newTopic(rec)
		t.partitions = b.openClusterPartitions(t, rec, 0)
		b.mu.Lock()
		b.addTopicLocked(t)
		b.mu.Unlock()
		b.logger.Info("topic created", "topic", name, "partitions", rec.Partitions)
		return
	}
	have := int32(len(t.Partitions()))
	var more []*Partition
	if rec.Partitions > have {
		more = b.openClusterPartitions(t, rec, have)
	}
	b.reconcileReplicas(t, rec)
	t.mu.Lock()
	t.partitions = append(t.partitions, more...)
	t.config.overrides = rec.Configs
	cfg := t.config
	parts := t.partitions
	t.mu.Unlock()
	for _, p := range parts {
		if p.log != nil {
			p.log.SetConfig(cfg.logConfig())
		}
	}
}

// openClusterPartitions opens partitions from to rec.Partitions-1 of t:
// the replicas this node holds, and the rest as remote.
func (b *Broker) openClusterPartitions(t *Topic, rec topicRecord, from int32) []*Partition {
	cfg := t.currentConfig().logConfig()
	parts := make([]*Partition, rec.Partitions-from)
	b.inParallel(rec.Partitions-from, func(k int32) {
		i := from + k
		var replicas []int32
		if int(i) < len(rec.Replicas) {
			replicas = rec.Replicas[i]
		}
		parts[k] = b.openClusterPartition(t, i, replicas, cfg, false)
	})
	return parts
}

// openClusterPartition opens partition i of t, with replicas. A
// joining replica (a reassignment's new one, reassign.go) is opened here
// though replicas does not name this node yet, and starts empty, to be
// filled by the leader.
func (b *Broker) openClusterPartition(t *Topic, i int32, replicas []int32, cfg replica.Config, joining bool) *Partition {
	p := b.newPartition(t, i)
	p.replicas.Store(&replicas)
	if !joining && !slices.Contains(replicas, b.cfg.NodeID) {
		p.remote = true
		return p
	}
	members := replicas
	if joining {
		members = nil
	}
	err := b.createPartitionDir(p.dir, t.id)
	var l *replica.RaftLog
	if err == nil {
		l, err = b.cfg.Cluster.OpenPartitionLog(p.dir, partitionGroup(t.id, i), members, cfg, b.partitionStateChanged)
	}
	if err == nil {
		p.log, p.raft = l, l
		l.Group().SetForwardHandler(p.forwarded)
		l.Group().SetCallHandler(p.called)
		if err = p.loadProducers(); err != nil {
			l.Close()
			p.log, p.raft = nil, nil
		}
	}
	if err != nil {
		p.offline = err
		b.logger.Error("partition offline", "topic", t.name, "partition", i, "err", err)
	}
	return p
}

// partitionForward is what a node forwards to a partition's leader over
// the cluster's transport: a transaction marker to write (markers.go), or
// the node to hand the leadership to (balance.go).
type partitionForward struct {
	Marker     *markerRequest `json:"marker,omitempty"`
	TransferTo int32          `json:"transfer_to,omitempty"`
}

// forwarded is the partition group's forward handler: it does what
// another node forwarded (partitionForward) while this node leads.
func (p *Partition) forwarded(_ context.Context, data []byte) (int64, error) {
	var f partitionForward
	if err := json.Unmarshal(data, &f); err != nil {
		return -1, fmt.Errorf("%w: a request forwarded to %s-%d: %v", ErrInvalidRecord, p.topic.name, p.index, err)
	}
	switch {
	case f.Marker != nil:
		if err := p.writeMarkerHere(*f.Marker); err != nil {
			return -1, err
		}
	case f.TransferTo > 0:
		p.raft.Group().TransferLeadership(uint64(f.TransferTo))
	default:
		return -1, fmt.Errorf("%w: an empty request forwarded to %s-%d", ErrInvalidRecord, p.topic.name, p.index)
	}
	return 0, nil
}

// partitionGroup is the Raft group of partition i of topic id, the same
// on every node: a hash, with the top bit set so that it never meets the
// metadata group (1).
func partitionGroup(id [16]byte, i int32) uint64 {
	h := fnv.New64a()
	h.Write(id[:])
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(i)))
	return h.Sum64() | 1<<63
}

// assignReplicas places count partitions' replicas, from partition
// first on: rf consecutive nodes each, starting one node further for each
// partition (from a random node), so that leaders spread over the nodes.
func (b *Broker) assignReplicas(first, count int32, rf int) [][]int32 {
	nodes := b.nodeIDs()
	var r [1]byte
	rand.Read(r[:])
	start := int(r[0])
	out := make([][]int32, 0, count-first)
	for i := first; i < count; i++ {
		replicas := make([]int32, rf)
		for j := range rf {
			replicas[j] = nodes[(start+int(i)+j)%len(nodes)]
		}
		out = append(out, replicas)
	}
	return out
}

// replicationFactor checks a requested replication factor (<= 0: the
// default, min(3, nodes)).
func (b *Broker) replicationFactor(rf int16) (int, error) {
	n := b.NodeCount()
	switch {
	case rf <= 0:
		return min(3, n), nil
	case int(rf) > n:
		return 0, fmt.Errorf("%w: Replication factor: %d larger than available brokers: %d.", ErrInvalidReplicationFactor, rf, n)
	}
	return int(rf), nil
}

// Replicas lists the partition's replicas, the preferred leader first
// (nil on a single node).
func (p *Partition) Replicas() []int32 {
	if r := p.replicas.Load(); r != nil {
		return *r
	}
	return nil
}

// Leadership is the partition as this node sees it: the leader (-1 if
// none is known), its leader epoch (the Raft term), and the replicas in
// sync (in contact with this node). A single node leads every partition
// at epoch 0.
func (p *Partition) Leadership(self int32) (leader, epoch int32, isr []int32) {
	if p.remote {
		// No replica here: the leader its metadata record names, and the
		// replicas this node is in contact with (leadership.go).
		// A leader known to be down is no leader: clients ask again
		// rather than wait on it, until the next one records itself.
		leader, epoch = p.broker.reportedLeader(p.topic, p.index)
		if leader >= 0 && !p.broker.NodeUp(leader) {
			leader = -1
		}
		isr = []int32{}
		for _, r := range p.Replicas() {
			if p.broker.NodeUp(r) {
				isr = append(isr, r)
			}
		}
		return leader, epoch, isr
	}
	if p.raft == nil {
		return self, 0, []int32{self}
	}
	id, term, _ := p.raft.Leadership()
	leader = int32(id)
	if id == 0 {
		leader = -1
	}
	for _, r := range p.raft.InContact() {
		isr = append(isr, int32(r))
	}
	return leader, int32(term), isr
}

// CheckLeader fails with ErrNotLeader unless this node leads the
// partition (always on a single node).
func (p *Partition) CheckLeader() error {
	if p.remote {
		return fmt.Errorf("%w: this node holds no replica of %s-%d", ErrNotLeader, p.topic.name, p.index)
	}
	if p.raft == nil {
		return nil
	}
	if leader, _, leading := p.raft.Leadership(); !leading {
		return fmt.Errorf("%w: %s-%d is led by node %d", ErrNotLeader, p.topic.name, p.index, leader)
	}
	return nil
}

// Leading reports whether this node leads the partition and takes
// appends, and in which term: a single node leads every partition it
// holds, for good, in term 0.
func (p *Partition) Leading() (term uint64, leading bool) {
	switch {
	case p.remote:
		return 0, false
	case p.raft == nil:
		return 0, true
	}
	_, term, leading = p.raft.Leadership()
	return term, leading
}

// AwaitLeadership waits, on the partition's leader, until the entries of
// the terms before its own are committed: from then on the log as read
// here holds everything the partition acknowledged, which is what state
// rebuilt from it (producers, groups, transactions) needs. It fails with
// ErrNotLeader if this node does not lead, or stops leading meanwhile.
func (p *Partition) AwaitLeadership(ctx context.Context) error {
	if err := p.CheckLeader(); err != nil || p.raft == nil {
		return err
	}
	if err := p.raft.Commit(p.raft.EndOffset()).Wait(ctx); err != nil {
		return fmt.Errorf("%w: %s-%d: %v", ErrNotLeader, p.topic.name, p.index, err)
	}
	return nil
}

// checkInSync refuses an acks=all produce while fewer replicas than the
// topic's min.insync.replicas are in sync (in contact with this node; a
// single node is always in sync with itself), as Kafka does: by default
// 2 of 3 in a cluster (topicDefaults).
func (p *Partition) checkInSync(acks int16, cfg topicConfig) error {
	if acks != -1 {
		return nil
	}
	in := 1
	if p.raft != nil {
		in = len(p.raft.InContact())
	}
	need := cfg.int("min.insync.replicas")
	if _, set := cfg.overrides["min.insync.replicas"]; !set && p.broker.cfg.MinInsyncReplicas <= 0 {
		// Unset, the default is min(2, replicas) of this partition as it
		// is now: a reassignment changes its replicas, not the topic's
		// replication factor that topicDefaults shows.
		need = int64(min(2, max(len(p.Replicas()), 1)))
	}
	if int64(in) < need {
		return fmt.Errorf("%w: The size of the current ISR (%d) is insufficient to satisfy the min.isr requirement of %d for partition %s-%d",
			ErrNotEnoughReplicas, in, need, p.topic.name, p.index)
	}
	return nil
}

// ensureProducers rebuilds the idempotent producers' state from the log
// when this node has just become the partition's leader: a follower's
// table is not kept as Raft writes its log. It first waits for the
// entries of earlier terms to be committed, so that the whole log is
// read. Caller holds produceMu.
func (p *Partition) ensureProducers() error {
	if p.raft == nil {
		return nil
	}
	_, term, leading := p.raft.Leadership()
	if !leading || term == p.producersTerm {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.AwaitLeadership(ctx); err != nil {
		return err
	}
	if err := p.loadProducers(); err != nil {
		return p.storageError("rebuild producer state of", err)
	}
	p.producersTerm = term
	return nil
}

// writeClusterTopic writes a topic's record and returns the topic once
// this node applied it.
func (b *Broker) writeClusterTopic(rec topicRecord) (*Topic, error) {
	if err := b.meta.write(topicKey(rec.Name), rec); err != nil {
		return nil, err
	}
	t, err := b.Topic(rec.Name)
	if err == nil && t.id != rec.ID {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, rec.Name) // another node's creation won
	}
	return t, err
}

// reserveClusterProducerIDs asks the cluster for this node's next block
// of producer ids. Caller holds producerIDMu.
func (b *Broker) reserveClusterProducerIDs() error {
	for {
		b.mu.RLock()
		start := b.state.producerIDBlockEnd
		b.mu.RUnlock()
		req := producerIDBlockRequest(b.cfg.NodeID, start, producerIDsBlockSize)
		if err := b.meta.write(req.key, req.value); err != nil {
			return err
		}
		b.mu.RLock()
		block := b.state.producerBlocks[b.cfg.NodeID]
		b.mu.RUnlock()
		if block == [2]int64{start, start + producerIDsBlockSize} {
			b.nextProducerID, b.producerIDBlockEnd = block[0], block[1]
			return nil
		}
		// Refused: another node's block came first; the end moved past it.
	}
}

// clusterIDOf is the cluster id of a cluster of nodes, the same on every
// node without a write.
func clusterIDOf(nodes []int32) string {
	h := fnv.New64a()
	for _, n := range nodes {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(n)))
	}
	return fmt.Sprintf("wharf-cluster-%016x", h.Sum64())
}
