package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
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
	// Empty with Join.
	Nodes map[int32]string
	// Join is a member's cluster address (--join): this node, new to the
	// cluster, asks it to be taken in, and learns the nodes from it
	// (join.go). It is asked again at every start, and answers the same
	// for a node it knows at the same address.
	Join string
	// TickInterval is the Raft tick (100 ms); the election timeout is ten
	// of them.
	TickInterval time.Duration
	// ControlledShutdownTimeout bounds how long Close first spends
	// handing this node's leaderships to other nodes (shutdown.go); 0:
	// it does not, and the other nodes elect new leaders once it is gone.
	ControlledShutdownTimeout time.Duration
}

// metadataGroup is the Raft group of the cluster's metadata log.
const metadataGroup = 1

// clusterHost is a node's part of the cluster: the Raft host running
// every group it holds a replica of, and the transport to its peers.
type clusterHost struct {
	transport *raft.TCPTransport
	host      *raft.Host
	// broker answers join requests once it is open (acceptJoins).
	broker atomic.Pointer[broker.Broker]
	self   int32
	// announcer tells the lower nodes this node's address until the
	// broker opens (announce.go).
	announcer *announcer
}

// startCluster binds the cluster address and starts the Raft host, and
// returns it with the broker's view of the cluster. The broker's Open
// waits for a quorum of the metadata group's voters until ctx ends.
func startCluster(ctx context.Context, cfg Config, logger *slog.Logger) (*clusterHost, *broker.ClusterConfig, error) {
	cc := cfg.Cluster
	self := cfg.NodeID
	if self <= 0 {
		return nil, nil, errors.New("node: a cluster node needs a node id above 0")
	}
	if _, ok := cc.Nodes[self]; !ok && cc.Join == "" {
		return nil, nil, fmt.Errorf("node: node %d is not in the initial cluster %v", self, cc.Nodes)
	}
	logger = logger.With("component", "raft")
	tr, err := raft.ListenTCP(raft.TCPConfig{NodeID: uint64(self), ListenAddr: cc.Addr, Logger: logger})
	if err != nil {
		return nil, nil, fmt.Errorf("node: cluster address: %w", err)
	}
	nodes, joinedEnd, err := clusterNodes(ctx, cfg, tr.Addr(), logger)
	if err != nil {
		tr.Close()
		return nil, nil, err
	}
	for id, addr := range nodes {
		if id != self {
			tr.SetPeer(uint64(id), addr)
		}
	}
	h, err := raft.NewHost(raft.Config{NodeID: uint64(self), Transport: tr, TickInterval: cc.TickInterval, Logger: logger})
	if err != nil {
		tr.Close()
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	ch := &clusterHost{transport: tr, host: h, self: self}
	tr.SetJoinHandler(ch.answerJoin)
	tr.Start(h)
	h.Start()
	if joinedEnd == 0 {
		// A node that joined just now needs no announcing: the join
		// recorded its address in the metadata log, and the members,
		// which have not applied it yet, would refuse an announcement
		// from a node they do not count as a member.
		ch.announcer = startAnnouncer(ctx, self, tr.Addr(), nodes, logger)
	}
	// The initial cluster's nodes are the metadata group's first voters,
	// and name the cluster (its id) whatever joined or left since; a
	// joining node has none: the controller's snapshot brings them.
	ids := slices.Sorted(maps.Keys(cc.Nodes))
	var voters []uint64
	for _, id := range ids {
		voters = append(voters, uint64(id))
	}
	if cc.Join != "" {
		ids = slices.Sorted(maps.Keys(nodes))
	}
	bc := &broker.ClusterConfig{
		Nodes:     ids,
		NodeAddrs: nodes,
		SetPeer:   func(node int32, addr string) { tr.SetPeer(uint64(node), addr) },
		OpenMetadataLog: func(dir string, lc replica.Config) (*replica.RaftLog, error) {
			l, err := replica.OpenRaft(dir, lc, replica.RaftOptions{
				Host: h, Group: metadataGroup, Members: voters, Logger: logger, WholeSnapshots: true})
			if err == nil && cc.Join == "" {
				if err = checkInitialCluster(uint64(self), voters, l.Replicas()); err != nil {
					l.Close()
				}
			}
			return l, err
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
		Call: func(ctx context.Context, group uint64, node int32, data []byte) ([]byte, error) {
			return h.Call(ctx, group, uint64(node), data)
		},
		OpenContext:       ctx,
		JoinedMetadataEnd: joinedEnd,
	}
	return ch, bc, nil
}

// acceptJoins makes this node answer other nodes' join requests, once
// its broker is open.
func (c *clusterHost) acceptJoins(b *broker.Broker) {
	if c != nil {
		c.broker.Store(b)
		c.announcer.stop() // its quorum formed: the log has every address
	}
}

// answerJoin answers a join request through the broker, or, before it is
// open (this node waits for its metadata quorum), errNotServingYet, which
// the joining node asks again after (join).
func (c *clusterHost) answerJoin(_ context.Context, request []byte) ([]byte, error) {
	var req joinRequest
	if err := json.Unmarshal(request, &req); err != nil {
		return nil, fmt.Errorf("not a join request: %w", err)
	}
	if req.Announce {
		members, open := c.metadataMembers()
		if !open {
			return nil, errNotServingYet
		}
		return nil, takeAnnouncement(c.transport, c.self, members, req)
	}
	b := c.broker.Load()
	if b == nil {
		return nil, errNotServingYet
	}
	return answerJoin(b, req)
}

// metadataMembers lists the metadata group's voters and learners as
// this node knows them, and whether the group is open yet.
func (c *clusterHost) metadataMembers() ([]uint64, bool) {
	for _, g := range c.host.Groups() {
		if g.ID() == metadataGroup {
			return g.Members(), true
		}
	}
	return nil, false
}

// close stops the host and the transport, once every replica is closed.
func (c *clusterHost) close() {
	if c == nil {
		return
	}
	c.announcer.stop()
	c.host.Close()
	c.transport.Close()
}

// stopWhenRemoved fails the node once it applies its own removal from
// the cluster (wharf cluster remove-node): a removed node serves no
// more, as KRaft fences an unregistered broker, and Start refuses it
// afterwards. It returns when the node closes.
func (n *Node) stopWhenRemoved() {
	select {
	case <-n.cores.broker.Removed():
		err := n.cores.broker.RemovedErr()
		n.logger.Error("this node was removed from the cluster; it stops serving", "err", err)
		n.fail(err)
	case <-n.closing:
	}
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
			n.txns = txns
			n.groups.Store(groups)
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
