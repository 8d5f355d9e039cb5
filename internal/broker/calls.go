package broker

import (
	"context"
	"fmt"
)

// Calls to a partition's leader. Some questions only the leader of an
// internal partition can answer: whether a transaction is open is known
// to the transaction coordinator, the leader of the id's partition of
// __transaction_state (internal/txn, verify.go). The owner of the topic
// installs what answers them (HandlePartitionCalls); other nodes ask
// through CallLeader, over the cluster's transport. A node that does
// not host the partition drops the call, and the caller's context runs
// out.

// PartitionCallHandler answers a call another node made to this node's
// replica of p.
type PartitionCallHandler func(ctx context.Context, p *Partition, data []byte) ([]byte, error)

// HandlePartitionCalls makes fn answer the calls made to the partitions
// of topic on this node.
func (b *Broker) HandlePartitionCalls(topic string, fn PartitionCallHandler) {
	b.callHandlers.Store(topic, fn)
}

// called is the partition group's call handler.
func (p *Partition) called(ctx context.Context, _ uint64, data []byte) ([]byte, error) {
	fn, ok := p.broker.callHandlers.Load(p.topic.name)
	if !ok {
		return nil, fmt.Errorf("no calls taken for %s-%d", p.topic.name, p.index)
	}
	return fn.(PartitionCallHandler)(ctx, p, data)
}

// CallLeader sends data to the node that leads the partition, whose
// handler (HandlePartitionCalls) answers, and waits for the answer
// until ctx ends. ErrNotLeader at once while no leader is known or the
// leader's node is known to be down (the caller retries later rather
// than wait on it); only in a cluster.
func (p *Partition) CallLeader(ctx context.Context, data []byte) ([]byte, error) {
	b := p.broker
	if b.cfg.Cluster == nil || b.cfg.Cluster.Call == nil {
		return nil, fmt.Errorf("%s-%d: calls need a cluster", p.topic.name, p.index)
	}
	leader, _, _ := p.Leadership(b.cfg.NodeID)
	switch {
	case leader < 0:
		return nil, fmt.Errorf("%w: %s-%d has no leader", ErrNotLeader, p.topic.name, p.index)
	case !b.NodeUp(leader):
		return nil, fmt.Errorf("%w: node %d, the leader of %s-%d, is down", ErrNotLeader, leader, p.topic.name, p.index)
	}
	return b.cfg.Cluster.Call(ctx, partitionGroup(p.topic.id, p.index), leader, data)
}

// Calls to a node. Some calls are addressed to a node rather than to a
// group's replica: a classic queue lives on one node and has no group
// (internal/mq, classic_remote.go). Every node of the cluster hosts a
// replica of the metadata group, so they travel as calls to that group,
// which answers two kinds: the removal question (fencing.go), whose data
// is empty, and node calls, whose data is an envelope naming the service
// that answers them (HandleNodeCalls) before the service's own data.

// NodeCallHandler answers a node call another node (from) made to this
// node.
type NodeCallHandler func(ctx context.Context, from int32, data []byte) ([]byte, error)

// HandleNodeCalls makes fn answer the node calls to service on this node
// (none with nil).
func (b *Broker) HandleNodeCalls(service string, fn NodeCallHandler) {
	if fn == nil {
		b.nodeCallHandlers.Delete(service)
		return
	}
	b.nodeCallHandlers.Store(service, fn)
}

// CallNode sends data to node, whose handler of service answers
// (HandleNodeCalls), and waits for the answer until ctx ends; only in a
// cluster. A node that is down or has no such handler does not answer.
func (b *Broker) CallNode(ctx context.Context, node int32, service string, data []byte) ([]byte, error) {
	if b.meta.raft == nil || b.cfg.Cluster.Call == nil {
		return nil, fmt.Errorf("calls to node %d need a cluster", node)
	}
	if len(service) == 0 || len(service) > 255 {
		return nil, fmt.Errorf("node call service %q: 1 to 255 bytes", service)
	}
	envelope := make([]byte, 0, 1+len(service)+len(data))
	envelope = append(append(append(envelope, byte(len(service))), service...), data...)
	return b.cfg.Cluster.Call(ctx, b.meta.raft.Group().ID(), node, envelope)
}

// answerMetadataCall is the metadata group's call handler: the removal
// question, or a node call for the service its envelope names.
func (b *Broker) answerMetadataCall(ctx context.Context, from uint64, data []byte) ([]byte, error) {
	if len(data) == 0 {
		return b.answerRemovalCall(ctx, from, data)
	}
	n := int(data[0])
	if n == 0 || 1+n > len(data) {
		return nil, fmt.Errorf("a node call from node %d with a malformed envelope", from)
	}
	fn, ok := b.nodeCallHandlers.Load(string(data[1 : 1+n]))
	if !ok {
		return nil, fmt.Errorf("no node calls taken for %q", data[1:1+n])
	}
	return fn.(NodeCallHandler)(ctx, int32(from), data[1+n:])
}
