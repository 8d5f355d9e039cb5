package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
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
// than wait on it); only in a cluster. A leader that stops leading
// before it answers (it died, or handed over) is given up as soon as this
// node sees it, and the call goes to the next leader (atLeader): what is
// sent this way must be safe to handle twice (a verification is a
// question, which changes nothing).
func (p *Partition) CallLeader(ctx context.Context, data []byte) ([]byte, error) {
	b := p.broker
	if b.cfg.Cluster == nil || b.cfg.Cluster.Call == nil {
		return nil, fmt.Errorf("%s-%d: calls need a cluster", p.topic.name, p.index)
	}
	var out []byte
	err := p.atLeader(ctx, func(ctx context.Context, leader int32) (err error) {
		if leader == b.cfg.NodeID { // this node took over meanwhile
			out, err = p.called(ctx, uint64(leader), data)
		} else {
			out, err = b.cfg.Cluster.Call(ctx, partitionGroup(p.topic.id, p.index), leader, data)
		}
		return err
	})
	return out, err
}

// errLeaderMoved ends a request to a partition's leader once this node
// takes another node, or none, for the leader.
var errLeaderMoved = errors.New("the partition's leadership moved while the request waited")

// atLeader runs send, a request to the partition's leader, with a
// context that ends as soon as this node no longer takes that node for
// the leader (whileLeads): a leader killed -9 never answers, and the
// election that replaces it is the first this node hears of its death.
// Then, as when the node asked answers that it does not lead (elected,
// it takes requests only once it committed in its term) or cannot be
// reached (raft.ErrUnreachable: its connection broke, or this node takes
// it for down, before the election), it sends again to the leader then,
// once one is known, until ctx ends; any other failure is returned at
// once. It fails with ErrNotLeader at once if no leader (in contact) is
// known at the start, and once ctx ends after a move. send is called
// with this node's id when this node leads.
func (p *Partition) atLeader(ctx context.Context, send func(ctx context.Context, leader int32) error) error {
	leader := p.liveLeader()
	if leader < 0 {
		return fmt.Errorf("%w: %s-%d has no leader in contact", ErrNotLeader, p.topic.name, p.index)
	}
	for {
		lctx, stop := p.whileLeads(ctx, leader)
		err := send(lctx, leader)
		moved := errors.Is(context.Cause(lctx), errLeaderMoved)
		stop()
		switch {
		case err == nil:
			return nil
		case moved:
			p.broker.logger.Debug("the partition's leader changed during a request; asking the next one",
				"topic", p.topic.name, "partition", p.index, "leader", leader)
		case (refusedNotLeader(err) || errors.Is(err, raft.ErrUnreachable)) && ctx.Err() == nil:
			select {
			case <-time.After(leaderRetry):
			case <-ctx.Done():
			}
		default:
			return err
		}
		if err := p.awaitLeaderChange(ctx, -1); err != nil {
			return fmt.Errorf("%w: %s-%d: no leader after node %d: %v", ErrNotLeader, p.topic.name, p.index, leader, err)
		}
		leader = p.liveLeader()
	}
}

// refusedNotLeader reports whether err is a node's answer that it does not
// lead the partition: this node's own (ErrNotLeader), or another's, whose
// answer is text (raft.ErrForwarded).
func refusedNotLeader(err error) bool {
	return errors.Is(err, ErrNotLeader) ||
		errors.Is(err, raft.ErrForwarded) && strings.Contains(err.Error(), ErrNotLeader.Error())
}

// leaderRetry is how long atLeader waits before it asks again a node
// that said it does not lead (yet): a pause, not the next change, which
// on a busy partition comes with every append.
const leaderRetry = 50 * time.Millisecond

// whileLeads returns ctx, ended as well (with cause errLeaderMoved) once
// this node sees the partition led by another node than leader, or by
// none; stop ends its watch, and must be called.
func (p *Partition) whileLeads(ctx context.Context, leader int32) (lctx context.Context, stop func()) {
	lctx, cancel := context.WithCancelCause(ctx)
	go func() { // ends with lctx: at stop at the latest
		if p.awaitLeaderChange(lctx, leader) == nil {
			cancel(errLeaderMoved)
		}
	}()
	return lctx, func() { cancel(nil) }
}

// awaitLeaderChange waits until the partition's leader, as liveLeader
// has it, is another than leader, or ctx ends. It wakes on what changes
// the leader: this node's replica's Raft state (an election starting, a
// new leader), and the metadata applied here, where a leader records
// itself for the nodes holding no replica (leadership.go). Nothing runs
// while neither changes.
func (p *Partition) awaitLeaderChange(ctx context.Context, leader int32) error {
	for {
		replica, metadata := p.leadershipSignals()
		if p.liveLeader() != leader {
			return nil
		}
		select {
		case <-replica:
		case <-metadata:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// leadershipSignals returns the channels the next changes that may
// change the partition's leader close: its replica's Raft state or high
// watermark (nil without a replica here: never closed), and the
// application of metadata records, a leader's among them (nil on a
// single node).
func (p *Partition) leadershipSignals() (replica, metadata <-chan struct{}) {
	if p.raft != nil {
		replica = p.raft.Changed()
	}
	b := p.broker
	b.mu.RLock()
	metadata = b.applyChanged
	b.mu.RUnlock()
	return replica, metadata
}

// liveLeader is the partition's leader as this node sees it (Leadership,
// without the replicas in sync, which a watch woken by every append of a
// busy partition has no use for), -1 while none is known or its node is
// known to be down.
func (p *Partition) liveLeader() int32 {
	leader := p.broker.cfg.NodeID // a single node leads every partition
	switch {
	case p.remote:
		leader, _ = p.broker.reportedLeader(p.topic, p.index)
	case p.raft != nil:
		id, _, _ := p.raft.Leadership()
		leader = int32(id)
		if id == 0 {
			leader = -1
		}
	}
	if leader < 0 || !p.broker.NodeUp(leader) {
		return -1
	}
	return leader
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
// cluster. It fails with an error wrapping raft.ErrUnreachable at once if
// this node takes node for down, and as soon as it does, or as soon as
// the connection to node breaks, while it waits: node may have handled
// data, and the caller may call again. A node with no such handler
// answers an error (raft.ErrCallFailed).
func (b *Broker) CallNode(ctx context.Context, node int32, service string, data []byte) ([]byte, error) {
	if b.meta.raft == nil || b.cfg.Cluster.Call == nil {
		return nil, fmt.Errorf("calls to node %d need a cluster", node)
	}
	if len(service) == 0 || len(service) > 255 {
		return nil, fmt.Errorf("node call service %q: 1 to 255 bytes", service)
	}
	if !b.NodeUp(node) {
		return nil, fmt.Errorf("%w: node %d is down", raft.ErrUnreachable, node)
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
