package node

import (
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/replica"
)

// openQuorumLog opens this node's replica of a quorum queue's Raft group
// (issue 14, internal/mq/quorum_cluster.go) as a partition's replica is
// opened: on the node's Raft host, with the node's fsync policy.
func openQuorumLog(bc *broker.ClusterConfig) func(dir string, group uint64, members []int32) (*replica.RaftLog, error) {
	return func(dir string, group uint64, members []int32) (*replica.RaftLog, error) {
		return bc.OpenPartitionLog(dir, group, members, replica.DefaultConfig())
	}
}
