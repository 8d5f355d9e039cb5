package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/replica"
)

// ClusterConfig makes the node one of a cluster (issue 13): --node-id,
// --cluster-addr and --initial-cluster.
type ClusterConfig struct {
	// Addr is where this node listens for its peers' Raft traffic
	// (--cluster-addr); port 0 picks one.
	Addr string
	// Nodes maps every node's id to its cluster address, this node's
	// included (--initial-cluster): the voters of the metadata group.
	Nodes map[int32]string
	// TickInterval is the Raft tick (100 ms); the election timeout is ten
	// of them.
	TickInterval time.Duration
}

// metadataGroup is the Raft group of the cluster's metadata log.
const metadataGroup = 1

// clusterHost is a node's part of the cluster: the Raft host running
// every group it holds a replica of, and the transport to its peers.
type clusterHost struct {
	transport *raft.TCPTransport
	host      *raft.Host
}

// startCluster binds the cluster address and starts the Raft host, and
// returns it with the broker's view of the cluster.
func startCluster(cfg Config, logger *slog.Logger) (*clusterHost, *broker.ClusterConfig, error) {
	cc := cfg.Cluster
	self := cfg.NodeID
	if self <= 0 {
		return nil, nil, errors.New("node: a cluster node needs a node id above 0")
	}
	if _, ok := cc.Nodes[self]; !ok {
		return nil, nil, fmt.Errorf("node: node %d is not in the initial cluster %v", self, cc.Nodes)
	}
	peers := map[uint64]string{}
	for id, addr := range cc.Nodes {
		if id != self {
			peers[uint64(id)] = addr
		}
	}
	logger = logger.With("component", "raft")
	tr, err := raft.ListenTCP(raft.TCPConfig{NodeID: uint64(self), ListenAddr: cc.Addr, Peers: peers, Logger: logger})
	if err != nil {
		return nil, nil, fmt.Errorf("node: cluster address: %w", err)
	}
	h, err := raft.NewHost(raft.Config{NodeID: uint64(self), Transport: tr, TickInterval: cc.TickInterval, Logger: logger})
	if err != nil {
		tr.Close()
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	tr.Start(h)
	h.Start()
	ch := &clusterHost{transport: tr, host: h}
	nodes := slices.Sorted(maps.Keys(cc.Nodes))
	voters := make([]uint64, len(nodes))
	for i, id := range nodes {
		voters[i] = uint64(id)
	}
	bc := &broker.ClusterConfig{
		Nodes: nodes,
		OpenMetadataLog: func(dir string) (*replica.RaftLog, error) {
			return replica.OpenRaft(dir, replica.DefaultConfig(), replica.RaftOptions{
				Host: h, Group: metadataGroup, Members: voters, Logger: logger})
		},
		OpenPartitionLog: func(dir string, group uint64, replicas []int32, lc replica.Config, stateChanged func()) (*replica.RaftLog, error) {
			members := make([]uint64, len(replicas))
			for i, r := range replicas {
				members[i] = uint64(r)
			}
			var changed func(raft.Status)
			if stateChanged != nil {
				changed = func(raft.Status) { stateChanged() }
			}
			return replica.OpenRaft(dir, lc, replica.RaftOptions{
				Host: h, Group: group, Members: members, Fsync: cfg.Fsync, Logger: logger,
				StateChanged: changed})
		},
		PeerUp: func(node int32) bool { return node == self || h.PeerUp(uint64(node)) },
		Forward: func(ctx context.Context, group uint64, node int32, data []byte) (int64, error) {
			return h.Forward(ctx, group, uint64(node), data)
		},
	}
	return ch, bc, nil
}

// close stops the host and the transport, once every replica is closed.
func (c *clusterHost) close() {
	if c == nil {
		return
	}
	c.host.Close()
	c.transport.Close()
}

// openClusterCoordinators opens the group and transaction coordinators of
// a cluster node, which needs the cluster: the first node to open them
// creates __consumer_offsets through the metadata log, which needs a
// quorum. Until then the Kafka server answers their APIs
// COORDINATOR_NOT_AVAILABLE, which clients retry. It tries again every
// second until it succeeds or the node closes.
func (n *Node) openClusterCoordinators() {
	for {
		groups, txns, err := openCoordinators(n.cfg, n.cores.broker, n.logger)
		if err == nil {
			n.groups, n.txns = groups, txns
			n.kafkaServer.SetCoordinators(groups, txns)
			return
		}
		n.logger.Warn("the coordinators cannot start yet; retrying", "err", err)
		select {
		case <-n.closing:
			return
		case <-time.After(time.Second):
		}
	}
}
