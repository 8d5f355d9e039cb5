package node

import (
	"context"
	"maps"
	"slices"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/replica"
)

// mqCluster makes the queueing core of a cluster node follow the
// definitions every node writes to the metadata group (issue 14,
// internal/mq/cluster.go), and replicate quorum queues on the node's
// Raft host as partitions are (bc), and reach the replicas of other
// nodes through the host's calls (consumers and publishers of quorum
// queues led elsewhere), and other nodes' classic queues through node
// calls (the broker's, over the metadata group); nil on a single node.
func mqCluster(cfg Config, b *broker.Broker, bc *broker.ClusterConfig, ch *clusterHost) *mq.ClusterConfig {
	if cfg.Cluster == nil {
		return nil
	}
	defs := b.Definitions()
	// New quorum queues are placed on the cluster's nodes as they are
	// now: joined ones too, removed ones not.
	nodes := func() []int32 { return slices.Sorted(maps.Keys(b.ClusterNodes())) }
	// A quorum queue's replica is opened as a partition's; the queue
	// follows its leadership through the log itself (quorumstore), so it
	// needs no state-change callback.
	openQuorumLog := func(dir string, group uint64, members []int32, rc replica.Config) (*replica.RaftLog, error) {
		return bc.OpenPartitionLog(dir, group, members, rc, nil)
	}
	watch := func(fn func(key string)) { defs.Watch(mqDefinitions, fn) }
	return &mq.ClusterConfig{NodeID: cfg.NodeID, Watch: watch, Get: defs.Get, PutIf: defs.PutIf, Barrier: defs.Barrier,
		Nodes: nodes, OpenQuorumLog: openQuorumLog,
		// A classic queue's home node killed -9 is out of contact as soon
		// as its connection breaks (404, basic.cancel, not routed to).
		PeerUp: func(node int32) bool { return bc.PeerUp(node) && ch.host.Reachable(uint64(node)) },
		Call: func(ctx context.Context, group uint64, node int32, data []byte) ([]byte, error) {
			return ch.host.Call(ctx, group, uint64(node), data)
		},
		CallNode: func(ctx context.Context, node int32, data []byte) ([]byte, error) {
			return b.CallNode(ctx, node, mqCalls, data)
		},
		HandleCalls: func(fn func(ctx context.Context, from int32, data []byte) ([]byte, error)) {
			b.HandleNodeCalls(mqCalls, fn)
		}}
}

// mqCalls is the service internal/mq's node calls are for.
const mqCalls = "mq"

// mqDefinitions is the prefix of internal/mq's keys in the definition
// store; the users, ACLs, quotas and permissions follow their own.
const mqDefinitions = "mq/"
