package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
)

// Cluster membership (issue 13): nodes joining and leaving a running
// cluster.
//
// The initial cluster (--initial-cluster) is every node's static start.
// A node that joins later is recorded in the metadata log (a nodeRecord:
// its id and cluster address), and so is the removal of any node; the
// cluster's nodes are the initial ones and the joined ones, less the
// removed. Every node applies the records: it tells its transport where
// a new node listens, and places new partitions' replicas on every node.
//
// The metadata group follows the records, driven by its leader (the
// controller, membershipLoop): a joined node becomes a learner of the
// group, which brings its replica of the metadata log up to date; it is
// promoted to a voter only while the group has fewer than
// metadataVoters voters (a removed voter's place, or a cluster started
// with fewer nodes), as KRaft keeps a fixed controller quorum and lets
// further brokers observe. A removed node leaves the group, the
// controller first handing its leadership on if it is the one removed.
// The removed node stops serving once it applies its removal, or, if it
// was down or cut off then, once the others tell it (fencing.go).

// metadataVoters is how many voters the controller keeps the metadata
// group at, when it has the nodes: three tolerate one node down, as an
// RF3 partition does.
const metadataVoters = 3

// learnerLag is how many entries behind the leader a learner may be
// and count as caught up, for its promotion: under load a replica is
// never exactly level.
const learnerLag = 64

// membershipInterval is how often the membership loop checks the
// groups it drives against the records, besides every applied change.
const membershipInterval = 250 * time.Millisecond

const nodeKeyPrefix = "node/"

// nodeRecord is a node joined to the cluster after it started, or any
// node removed from it.
type nodeRecord struct {
	NodeID  int32  `json:"node_id"`
	Addr    string `json:"addr"` // its cluster address
	Removed bool   `json:"removed,omitempty"`
}

// ErrNodeIDTaken refuses a join under an id the cluster uses or used.
var ErrNodeIDTaken = errors.New("node id taken")

// ErrUnknownNode is a node id the cluster does not have.
var ErrUnknownNode = errors.New("unknown node")

// applyMembership applies the records of nodes and reassignments.
func (st *metadataState) applyMembership(key string, value []byte) error {
	if strings.HasPrefix(key, reassignKeyPrefix) {
		return st.applyReassignment(key, value)
	}
	var r nodeRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return fmt.Errorf("metadata record %q: %w", key, err)
	}
	if st.nodes == nil {
		st.nodes = map[int32]nodeRecord{}
	}
	st.nodes[r.NodeID] = r
	st.setOrigin(key)
	if r.Removed {
		delete(st.brokers, r.NodeID)
		st.dropOrigin(brokerKey(r.NodeID))
	}
	return nil
}

// clusterNodesLocked lists the cluster's nodes with their cluster addresses:
// the initial ones and the joined ones, less the removed. Caller holds
// b.mu.
func (b *Broker) clusterNodesLocked() map[int32]string {
	nodes := maps.Clone(b.cfg.Cluster.NodeAddrs)
	for _, id := range b.cfg.Cluster.Nodes {
		if _, ok := nodes[id]; !ok {
			nodes[id] = ""
		}
	}
	for id, r := range b.state.nodes {
		if r.Removed {
			delete(nodes, id)
		} else {
			nodes[id] = r.Addr
		}
	}
	return nodes
}

// ClusterNodes lists the cluster's nodes and their cluster addresses.
func (b *Broker) ClusterNodes() map[int32]string {
	if b.cfg.Cluster == nil {
		return map[int32]string{b.cfg.NodeID: ""}
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.clusterNodesLocked()
}

// AddNode records node id, listening for its peers at addr, as a member
// of the cluster, and returns the cluster's nodes and the end of the
// metadata log once it is applied here: the joining node's replica of
// the log is up to date once it reaches that offset. Asking again with
// the same address (a node restarted with --join) is answered the same;
// an id in use by another address, or removed before, is refused.
func (b *Broker) AddNode(id int32, addr string) (map[int32]string, int64, error) {
	if b.cfg.Cluster == nil {
		return nil, 0, errors.New("a single node takes no other nodes")
	}
	if id <= 0 || addr == "" {
		return nil, 0, fmt.Errorf("a joining node needs an id above 0 and a cluster address, got %d and %q", id, addr)
	}
	b.mu.RLock()
	have, known := b.clusterNodesLocked()[id]
	removed := b.state.nodes[id].Removed
	writeClusterID := b.state.clusterID == ""
	b.mu.RUnlock()
	switch {
	case removed:
		return nil, 0, fmt.Errorf("%w: node %d was removed from the cluster; give the new node another id", ErrNodeIDTaken, id)
	case known && have != addr:
		return nil, 0, fmt.Errorf("%w: node %d is a member already, at %s", ErrNodeIDTaken, id, have)
	}
	recs := []keyValue{{nodeKeyPrefix + strconv.Itoa(int(id)), nodeRecord{NodeID: id, Addr: addr}}}
	if writeClusterID {
		// The cluster id is derived from the initial cluster, which the
		// new node does not know: it finds it in the log.
		recs = append(recs, keyValue{clusterKey, clusterRecord{ClusterID: b.clusterID}})
	}
	if !known || writeClusterID {
		if err := b.meta.writeAll(recs); err != nil {
			return nil, 0, err
		}
		b.logger.Info("node joined the cluster", "node", id, "addr", addr)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.clusterNodesLocked(), b.appliedEnd, nil
}

// startMembership starts the loop that follows the membership records.
func (b *Broker) startMembership(ctx context.Context) {
	b.bg.Go(func() { b.membershipLoop(ctx) })
}

// membershipLoop, on every node, tells the transport where nodes are
// and writes them down (addressbook.go), and drives the groups this node
// leads towards the membership the metadata records: the metadata group
// (on the controller) and the partitions being reassigned. Every step is proposed again until the
// group's configuration shows it, so the loop needs no memory of what it
// proposed, and a new leader picks up where the last one stopped.
func (b *Broker) membershipLoop(ctx context.Context) {
	peers := map[int32]string{}
	var written map[int32]string // the address book as last written
	ticker := time.NewTicker(membershipInterval)
	defer ticker.Stop()
	for {
		b.mu.RLock()
		changed := b.applyChanged
		nodes := b.clusterNodesLocked()
		b.mu.RUnlock()
		for id, addr := range nodes {
			if id != b.cfg.NodeID && addr != "" && peers[id] != addr && b.cfg.Cluster.SetPeer != nil {
				b.cfg.Cluster.SetPeer(id, addr)
				peers[id] = addr
			}
		}
		written = b.keepAddressBook(written, nodes)
		if _, _, leading := b.meta.raft.Leadership(); leading {
			b.driveMetadataGroup(nodes)
		}
		b.driveReassignments()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-ticker.C:
		}
	}
}

// driveMetadataGroup takes one step of the metadata group towards the
// cluster's nodes, on its leader.
func (b *Broker) driveMetadataGroup(nodes map[int32]string) {
	g := b.meta.raft.Group()
	m := g.Membership()
	members := slices.Concat(m.Voters, m.Learners)
	self := uint64(b.cfg.NodeID)
	var err error
	for _, id := range slices.Sorted(maps.Keys(nodes)) {
		if !slices.Contains(members, uint64(id)) {
			err = g.AddLearner(uint64(id))
			b.logStep(err, "metadata group: adding a learner", "node", id)
			return
		}
	}
	for _, id := range members {
		if _, ok := nodes[int32(id)]; ok {
			continue
		}
		if id == self {
			if to := b.caughtUpVoter(m, self, nil); to != 0 {
				g.TransferLeadership(to)
			}
			return
		}
		// A removed voter is replaced before it goes, when a learner can
		// take its place: the group never drops below its voters.
		if slices.Contains(m.Voters, id) && len(m.Voters) <= metadataVoters {
			if l := b.caughtUpLearner(m, nil); l != 0 {
				err = g.Promote(l)
				b.logStep(err, "metadata group: promoting a learner", "node", l)
				return
			}
		}
		err = g.RemoveMember(id)
		b.logStep(err, "metadata group: removing a member", "node", id)
		return
	}
	if len(m.Voters) < metadataVoters {
		if l := b.caughtUpLearner(m, nil); l != 0 {
			err = g.Promote(l)
			b.logStep(err, "metadata group: promoting a learner", "node", l)
		}
	}
}

// caughtUpLearner is a learner (in among, if given) whose log is up to
// date and which this node is in contact with; 0 if none.
func (b *Broker) caughtUpLearner(m raft.Membership, among []int32) uint64 {
	for _, id := range m.Learners {
		if (among == nil || slices.Contains(among, int32(id))) && m.CaughtUp(id, learnerLag) && b.NodeUp(int32(id)) {
			return id
		}
	}
	return 0
}

// caughtUpVoter is a voter other than self (in among, if given), up to
// date and in contact, to hand leadership to; 0 if none.
func (b *Broker) caughtUpVoter(m raft.Membership, self uint64, among []int32) uint64 {
	for _, id := range m.Voters {
		if id != self && (among == nil || slices.Contains(among, int32(id))) && m.CaughtUp(id, learnerLag) && b.NodeUp(int32(id)) {
			return id
		}
	}
	return 0
}

// logStep logs a membership step proposed, or why it was not.
func (b *Broker) logStep(err error, msg string, args ...any) {
	if err != nil {
		b.logger.Debug(msg+" failed; trying again", append(args, "err", err)...)
		return
	}
	b.logger.Debug(msg, args...)
}

// ErrNodeRemoved is this node's own removal from the cluster: it serves
// no more, and refuses to start again.
var ErrNodeRemoved = errors.New("node removed from the cluster")

func removedError(id int32) error {
	return fmt.Errorf("%w: node %d was removed (wharf cluster remove-node) and serves no more; "+
		"to bring this machine back, start it with an empty --data-dir and --join, under a new --node-id", ErrNodeRemoved, id)
}

// Removed returns a channel closed once this node has applied its own
// removal from the cluster; RemovedErr then says so.
func (b *Broker) Removed() <-chan struct{} { return b.removed }

// RemovedErr is ErrNodeRemoved for this node once it applied its
// removal, nil before.
func (b *Broker) RemovedErr() error {
	select {
	case <-b.removed:
		return removedError(b.cfg.NodeID)
	default:
		return nil
	}
}

// removedMarker is the file in the data directory that says this node
// was removed. A restarted node finds it at once, where its replica of
// the metadata log may not show the removal: Raft keeps the commit index
// it applied the removal at in memory, and the removed node gets no more
// of the group.
const removedMarker = "removed-from-cluster"

// nodeApplied hears that a node record was applied: this node's own
// removal is written down (removedMarker) and closes Removed.
func (b *Broker) nodeApplied() {
	b.mu.RLock()
	removed := b.state.nodes[b.cfg.NodeID].Removed
	b.mu.RUnlock()
	if removed {
		b.fenceRemoved()
	}
}

// writeRemovedMarker writes removedMarker and fsyncs it, not its
// directory: should a power cut lose the file, the removal may still show
// in the metadata log, which Open checks too.
func writeRemovedMarker(dataDir string, id int32) error {
	path := filepath.Join(dataDir, removedMarker)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, removedError(id))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// refuseRemoved fails with removedError if dataDir holds a node removed
// from its cluster.
func refuseRemoved(dataDir string, id int32) error {
	if _, err := os.Stat(filepath.Join(dataDir, removedMarker)); err == nil {
		return removedError(id)
	}
	return nil
}

// ErrNodeHoldsReplicas refuses to remove a node that is still a replica
// (or a reassignment's target) of some partition.
var ErrNodeHoldsReplicas = errors.New("node holds replicas")

// NodeRemovalHook moves what another core keeps on node id off it before
// the node is removed, and returns once that is done (within ctx), or
// why it cannot be.
type NodeRemovalHook func(ctx context.Context, id int32) error

// OnRemoveNode installs what RemoveNode runs before it records a
// removal: the node installs the queueing core's, which shrinks the
// node's quorum queue replicas away, so that a removal asked for
// directly (UnregisterBroker from any Kafka admin client) leaves no
// queue short of a member, as `wharf cluster remove-node` does not.
func (b *Broker) OnRemoveNode(fn NodeRemovalHook) { b.removalHook.Store(&fn) }

// RemoveNode records node id's removal from the cluster: it leaves the
// metadata group (the controller takes it out), the broker list and the
// nodes new replicas are placed on. Its partition replicas must have
// moved first (Reassign; `wharf cluster remove-node` does both); what
// other cores keep on it is moved off here (OnRemoveNode), or the
// removal is refused.
func (b *Broker) RemoveNode(id int32) error {
	if b.cfg.Cluster == nil {
		return fmt.Errorf("%w: a single node cannot be removed", ErrUnknownNode)
	}
	nodes := b.ClusterNodes()
	addr, ok := nodes[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: node %d is not a node of the cluster", ErrUnknownNode, id)
	case len(nodes) == 1:
		return fmt.Errorf("%w: node %d is the cluster's last node", ErrInvalidRequest, id)
	}
	if held := b.partitionsOn(id); len(held) > 0 {
		return fmt.Errorf("%w: node %d still holds replicas of %s; move them first (wharf cluster remove-node moves them)",
			ErrNodeHoldsReplicas, id, strings.Join(held, ", "))
	}
	if err := b.moveOthersOff(id); err != nil {
		return fmt.Errorf("%w: node %d %v", ErrNodeHoldsReplicas, id, err)
	}
	if err := b.meta.write(nodeKeyPrefix+strconv.Itoa(int(id)), nodeRecord{NodeID: id, Addr: addr, Removed: true}); err != nil {
		return err
	}
	if err := b.awaitLeftMetadataGroup(id); err != nil {
		return err
	}
	b.logger.Info("node removed from the cluster", "node", id)
	return nil
}

// removalHookWait bounds the removal hook: UnregisterBroker has no
// timeout field, and Kafka clients give such a request 10 s (franz-go's
// RequestTimeoutOverhead) or 30 s (request.timeout.ms), the removal
// itself included; a hook that runs out refuses, and a second try finds
// less to do.
const removalHookWait = 5 * time.Second

// moveOthersOff runs the removal hook for node id, if one is installed.
func (b *Broker) moveOthersOff(id int32) error {
	fn := b.removalHook.Load()
	if fn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(b.meta.ctx, removalHookWait)
	defer cancel()
	return (*fn)(ctx, id)
}

// awaitLeftMetadataGroup waits until the controller has taken node id
// out of the metadata group, as this node applied it: a removal is
// answered only once the quorum no longer counts the node, so it may be
// shut down at once.
func (b *Broker) awaitLeftMetadataGroup(id int32) error {
	ctx, cancel := context.WithTimeout(b.meta.ctx, b.meta.writeTimeout)
	defer cancel()
	for {
		m := b.meta.raft.Group().Membership()
		if !slices.Contains(m.Voters, uint64(id)) && !slices.Contains(m.Learners, uint64(id)) {
			return nil
		}
		select {
		case <-ctx.Done():
			if id == b.NodeID() && b.meta.ctx.Err() != nil {
				// This node was asked to remove itself (a Kafka client
				// sends UnregisterBroker to any broker it knows): it
				// applied its removal and stopped, which is what the
				// wait was for.
				return nil
			}
			return fmt.Errorf("%w: node %d is recorded as removed, but the metadata group has not let it go yet: %v", ErrStorage, id, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// partitionsOn names the partitions node id is a replica of, or is to
// be one of by a reassignment in progress.
func (b *Broker) partitionsOn(id int32) []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var held []string
	for _, name := range slices.Sorted(maps.Keys(b.state.topics)) {
		for i, replicas := range b.state.topics[name].Replicas {
			if slices.Contains(replicas, id) {
				held = append(held, fmt.Sprintf("%s-%d", name, i))
			}
		}
	}
	for _, r := range b.state.reassignments {
		if slices.Contains(r.Target, id) {
			held = append(held, fmt.Sprintf("%s-%d", r.Topic, r.Partition))
		}
	}
	return held
}
