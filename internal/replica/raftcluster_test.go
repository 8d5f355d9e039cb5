package replica_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/replica"
)

// tcpNode is one node of a cluster over loopback TCP: its transport, its
// host and its replicas of groups 1..n.
type tcpNode struct {
	id        uint64
	dir       string
	addr      string
	transport *raft.TCPTransport
	host      *raft.Host
	logs      []*replica.RaftLog
}

// tcpCluster is nodes nodes hosting groups groups over loopback TCP, each
// node with its own listener, as separate processes would be.
type tcpCluster struct {
	t      testing.TB
	nodes  []*tcpNode
	groups int
	cfg    raft.Config // the hosts' timing
}

func newTCPCluster(t testing.TB, nodes, groups int, cfg raft.Config) *tcpCluster {
	c := &tcpCluster{t: t, groups: groups, cfg: cfg}
	base := t.TempDir()
	for i := range nodes {
		n := &tcpNode{id: uint64(i + 1), dir: filepath.Join(base, fmt.Sprint(i+1)), addr: "127.0.0.1:0"}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		c.listen(n)
	}
	for _, n := range c.nodes {
		c.start(n)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.stop(n)
		}
	})
	return c
}

func (c *tcpCluster) listen(n *tcpNode) {
	tr, err := raft.ListenTCP(raft.TCPConfig{NodeID: n.id, ListenAddr: n.addr, Logger: quiet})
	if err != nil {
		c.t.Fatal(err)
	}
	n.transport, n.addr = tr, tr.Addr().String()
}

// start starts a node whose transport listens: its host, its peers'
// addresses, its replicas.
func (c *tcpCluster) start(n *tcpNode) {
	cfg := c.cfg
	cfg.NodeID, cfg.Transport, cfg.Logger = n.id, n.transport, quiet
	h, err := raft.NewHost(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	n.host = h
	var members []uint64
	for _, p := range c.nodes {
		members = append(members, p.id)
		if p != n {
			n.transport.SetPeer(p.id, p.addr)
		}
	}
	n.transport.Start(h)
	h.Start()
	n.logs = nil
	for g := range c.groups {
		l, err := replica.OpenRaft(filepath.Join(n.dir, fmt.Sprint(g+1)), replica.DefaultConfig(),
			replica.RaftOptions{Host: h, Group: uint64(g + 1), Members: members, Logger: quiet})
		if err != nil {
			c.t.Fatal(err)
		}
		n.logs = append(n.logs, l)
	}
}

// stop stops a node as a crash would for its peers: the connections drop
// and nothing more is sent.
func (c *tcpCluster) stop(n *tcpNode) {
	if n.host == nil {
		return
	}
	n.transport.Close()
	n.host.Close()
	for _, l := range n.logs {
		l.Close()
	}
	n.host = nil
}

// restart starts a stopped node again on its address.
func (c *tcpCluster) restart(n *tcpNode) {
	c.listen(n)
	c.start(n)
}

// leader waits for a leader of group g (0-based) and returns its node.
func (c *tcpCluster) leader(g int, timeout time.Duration) *tcpNode {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if n.host != nil && n.logs[g].Group().Status().Leading() {
				return n
			}
		}
		time.Sleep(time.Millisecond)
	}
	c.t.Fatalf("no leader of group %d after %v", g+1, timeout)
	return nil
}

// appendCommitted appends count batches to group g (0-based) through its
// leader and waits for the last to be committed; it returns the end
// offset. With ticks of 10 ms an election may come in between under
// -race on a busy machine: the appends then go again through the next
// leader.
func (c *tcpCluster) appendCommitted(g, count int) int64 {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		end, err := tryAppendCommitted(c.leader(g, 10*time.Second).logs[g], count)
		switch {
		case err == nil:
			return end
		case !errors.Is(err, replica.ErrNotLeader) && !errors.Is(err, replica.ErrAppendRefused) && !errors.Is(err, replica.ErrTruncated):
			c.t.Fatal(err)
		case time.Now().After(deadline):
			c.t.Fatalf("no append to group %d committed in 30s: %v", g+1, err)
		}
	}
}

// TestRaftLogOverTCP: a 3-node cluster over loopback TCP replicates, and
// when its leader stops another takes over with everything committed.
func TestRaftLogOverTCP(t *testing.T) {
	c := newTCPCluster(t, 3, 2, raft.Config{TickInterval: 10 * time.Millisecond})
	for g := range 2 {
		end := c.appendCommitted(g, 30)
		for _, n := range c.nodes {
			waitHW(t, n.logs[g], end)
		}
	}
	old := c.leader(0, time.Second)
	end := old.logs[0].HighWatermark()
	c.stop(old)
	l := c.leader(0, 10*time.Second)
	if l == old {
		t.Fatal("the stopped node still leads")
	}
	end = c.appendCommitted(0, 10)
	c.restart(old)
	waitHW(t, old.logs[0], end)
}

// TestRaftLogFollowersDropTheirCache: the followers' logs drop their page
// cache behind their tail, the leader's keeps it for its readers, and a
// follower that takes over keeps it from then on.
func TestRaftLogFollowersDropTheirCache(t *testing.T) {
	c := newTCPCluster(t, 3, 1, raft.Config{TickInterval: 10 * time.Millisecond})
	// waitKeeps waits until the leader of the moment keeps its cache and
	// every other node drops its own, and returns that leader.
	waitKeeps := func() *tcpNode {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			leader, got := c.leader(0, 10*time.Second), ""
			for _, n := range c.nodes {
				want := int64(replica.FollowerCacheKeep)
				if n == leader {
					want = 0
				}
				if n.host != nil && n.logs[0].CacheKeep() != want {
					got += fmt.Sprintf(" node %d keeps %d bytes, want %d;", n.id, n.logs[0].CacheKeep(), want)
				}
			}
			if got == "" {
				return leader
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d leads:%s", leader.id, got)
			}
			time.Sleep(time.Millisecond)
		}
	}
	c.appendCommitted(0, 5)
	old := waitKeeps()
	c.stop(old)
	c.appendCommitted(0, 5)
	if waitKeeps() == old {
		t.Fatal("the stopped node still leads")
	}
}

// A forward the leader refused because it arrived expired was not taken:
// the proposal tries again, as a new forward, while its caller waits.
func TestLateForwardIsRetried(t *testing.T) {
	late := fmt.Errorf("%w: %s", raft.ErrForwarded, raft.ErrLate.Error())
	if !replica.Retryable(late) {
		t.Errorf("%v: not retried", late)
	}
	if other := fmt.Errorf("%w: %s", raft.ErrForwarded, "topic already exists"); replica.Retryable(other) {
		t.Errorf("%v: retried", other)
	}
}
