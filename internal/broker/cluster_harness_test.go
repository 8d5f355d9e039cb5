package broker

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/replica"
)

// testCluster is brokers of one cluster in this process, their Raft
// hosts joined by a raft.MemNetwork, for the tests of membership and
// controlled shutdown.
type testCluster struct {
	t     *testing.T
	net   *raft.MemNetwork
	ids   []int32
	base  string
	nodes map[int32]*testNode
	// configure, if set, changes every node's Config before it opens.
	configure func(*Config)
}

// testNode is one running node of a testCluster.
type testNode struct {
	host *raft.Host
	b    *Broker
	log  *capturedLog
}

// clusterWriteTimeout bounds the test cluster's metadata writes: a write
// without a quorum fails after it.
const clusterWriteTimeout = 3 * time.Second

// newTestCluster starts n nodes (ids 1 to n) and waits until the
// metadata group has a leader.
func newTestCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return newTestClusterWith(t, n, nil)
}

// newTestClusterWith is newTestCluster with configure changing every
// node's Config.
func newTestClusterWith(t *testing.T, n int, configure func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, net: raft.NewMemNetwork(), base: t.TempDir(), nodes: map[int32]*testNode{}, configure: configure}
	for i := range n {
		c.ids = append(c.ids, int32(i+1))
	}
	t.Cleanup(func() {
		for id := range c.nodes {
			c.stop(id)
		}
	})
	for _, id := range c.ids {
		c.hostFor(id)
	}
	errs := make(chan error, n)
	for _, id := range c.ids {
		nd := c.nodes[id]
		go func() { // Open waits for a quorum: every node at once
			var err error
			nd.b, err = c.openBroker(id)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	c.waitFor("a metadata leader", func() bool { return c.leader() != 0 })
	return c
}

// hostFor starts the Raft host of node id on the network (again, after
// stop).
func (c *testCluster) hostFor(id int32) *testNode {
	c.t.Helper()
	h, err := raft.NewHost(raft.Config{NodeID: uint64(id), Transport: c.net.Transport(uint64(id)),
		TickInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		c.t.Fatal(err)
	}
	c.net.Register(uint64(id), h)
	h.Start()
	nd := &testNode{host: h, log: &capturedLog{}}
	c.nodes[id] = nd
	return nd
}

// openBroker opens node id's broker on its host.
func (c *testCluster) openBroker(id int32) (*Broker, error) {
	nd := c.nodes[id]
	h := nd.host
	voters := make([]uint64, len(c.ids))
	addrs := map[int32]string{}
	for i, n := range c.ids {
		voters[i] = uint64(n)
		addrs[n] = ""
	}
	off := false
	cfg := Config{
		DataDir:             filepath.Join(c.base, "node"+strconv.Itoa(int(id))),
		NodeID:              id,
		AutoLeaderRebalance: &off,
		Logger:              slog.New(slog.NewTextHandler(nd.log, nil)),
		Cluster: &ClusterConfig{
			Nodes:     c.ids,
			NodeAddrs: addrs,
			OpenMetadataLog: func(dir string, lc replica.Config) (*replica.RaftLog, error) {
				return replica.OpenRaft(dir, lc, replica.RaftOptions{Host: h, Group: 1, Members: voters,
					Logger: slog.New(slog.DiscardHandler), WholeSnapshots: true})
			},
			OpenPartitionLog: func(dir string, group uint64, replicas []int32, lc replica.Config, stateChanged func()) (*replica.RaftLog, error) {
				members := make([]uint64, len(replicas))
				for i, r := range replicas {
					members[i] = uint64(r)
				}
				return replica.OpenRaft(dir, lc, replica.RaftOptions{Host: h, Group: group, Members: members,
					Logger:       slog.New(slog.DiscardHandler),
					StateChanged: func(raft.Status) { stateChanged() }}) // leaders recorded, as a node does
			},
			PeerUp: func(node int32) bool { return node == id || h.PeerUp(uint64(node)) },
			Forward: func(ctx context.Context, group uint64, node int32, data []byte) (int64, error) {
				return h.Forward(ctx, group, uint64(node), data)
			},
			Call: func(ctx context.Context, group uint64, node int32, data []byte) ([]byte, error) {
				return h.Call(ctx, group, uint64(node), data)
			},
			WriteTimeout: clusterWriteTimeout,
		},
	}
	if c.configure != nil {
		c.configure(&cfg)
	}
	return Open(cfg)
}

// stop closes node id's broker and host, and takes it off the network.
func (c *testCluster) stop(id int32) {
	nd := c.nodes[id]
	if nd.b != nil {
		nd.b.Close()
	}
	nd.host.Close()
	c.net.Unregister(uint64(id))
	delete(c.nodes, id)
}

// restart starts node id again on its data directory and returns what
// its broker's Open returned.
func (c *testCluster) restart(id int32) (*Broker, error) {
	c.t.Helper()
	nd := c.hostFor(id)
	b, err := c.openBroker(id)
	nd.b = b
	return b, err
}

// isolate cuts (or, with cut false, restores) every link of node id.
func (c *testCluster) isolate(id int32, cut bool) {
	for _, other := range c.ids {
		if other != id {
			c.net.Cut(uint64(id), uint64(other), cut)
			c.net.Cut(uint64(other), uint64(id), cut)
		}
	}
}

// leader is the node leading the metadata group as a running node sees
// it, 0 if none.
func (c *testCluster) leader() int32 {
	for _, nd := range c.nodes {
		if nd.b != nil {
			if _, _, leading := nd.b.meta.raft.Leadership(); leading {
				return nd.b.cfg.NodeID
			}
		}
	}
	return 0
}

// broker is node id's broker.
func (c *testCluster) broker(id int32) *Broker { return c.nodes[id].b }

// waitFor waits until cond holds, for at most 20 s.
func (c *testCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
