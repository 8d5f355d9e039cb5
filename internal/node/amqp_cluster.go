package node

import (
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/mq"
)

// mqCluster makes the queueing core of a cluster node follow the
// definitions every node writes to the metadata group (issue 14,
// internal/mq/cluster.go); nil on a single node.
func mqCluster(cfg Config, defs *broker.DefinitionStore) *mq.ClusterConfig {
	if cfg.Cluster == nil {
		return nil
	}
	return &mq.ClusterConfig{NodeID: cfg.NodeID, Watch: defs.Watch, Get: defs.Get, Barrier: defs.Barrier}
}
