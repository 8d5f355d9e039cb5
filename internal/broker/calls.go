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
