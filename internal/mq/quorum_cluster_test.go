package mq

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/replica"
)

// newQuorumEnvs opens one registry per node over shared definitions, each
// with a Raft host on net for its quorum queues' replicas.
func newQuorumEnvs(t *testing.T, nodes int, net *raft.MemNetwork) []*env {
	t.Helper()
	return newQuorumEnvsWrapped(t, nodes, net, nil)
}

// newQuorumEnvsWrapped is newQuorumEnvs with what each node receives
// passing through wrap (if set) first.
func newQuorumEnvsWrapped(t *testing.T, nodes int, net *raft.MemNetwork, wrap func(node uint64, h raft.Handler) raft.Handler) []*env {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	c := newClusterDefs()
	ids := make([]int32, nodes)
	for i := range ids {
		ids[i] = int32(i + 1)
	}
	envs := make([]*env, nodes)
	for i := range envs {
		// A long election timeout (1 s): a leader cut off for the
		// length of a few calls keeps leading.
		h, err := raft.NewHost(raft.Config{NodeID: uint64(i + 1), Transport: net.Transport(uint64(i + 1)),
			TickInterval: 100 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if wrap != nil {
			net.Register(uint64(i+1), wrap(uint64(i+1), h))
		} else {
			net.Register(uint64(i+1), h)
		}
		h.Start()
		t.Cleanup(h.Close) // after the registry's close (cleanups run last first)
		d := nodeDefs{c: c, node: int32(i + 1)}
		cc := d.cluster()
		cc.Nodes = func() []int32 { return ids }
		cc.OpenQuorumLog = func(dir string, group uint64, members []int32, lc replica.Config) (*replica.RaftLog, error) {
			voters := make([]uint64, len(members))
			for j, m := range members {
				voters[j] = uint64(m)
			}
			return replica.OpenRaft(dir, lc, replica.RaftOptions{Host: h, Group: group, Members: voters, Logger: quiet})
		}
		cc.Call = func(ctx context.Context, group uint64, node int32, data []byte) ([]byte, error) {
			return h.Call(ctx, group, uint64(node), data)
		}
		cc.PeerUp = func(node int32) bool { return node == int32(i+1) || h.PeerUp(uint64(node)) }
		envs[i] = newEnv(t, func(cfg *Config) { cfg.Definitions, cfg.Cluster, cfg.Logger = d, cc, quiet })
	}
	return envs
}

// servingNode waits until one node serves the quorum queue name and
// returns its index.
func servingNode(t *testing.T, envs []*env, name string) int {
	t.Helper()
	at := -1
	eventually(t, "a node serves "+name, func() bool {
		at = servingNow(envs, name)
		return at >= 0
	})
	return at
}

// servingNow is the index of a node that serves the quorum queue name
// now, -1 if none does.
func servingNow(envs []*env, name string) int {
	for i, e := range envs {
		if _, err := e.v.accessQueue(name, 0); err == nil {
			return i
		}
	}
	return -1
}

// TestQuorumQueueInCluster: a quorum queue of two nodes is served on its
// group's leader only; a message is handed to a consumer only once its
// enqueue is committed (never while the leader is cut off from the
// follower), and one published on the follower is forwarded to the
// leader, confirmed and consumed there. (Consumers on the follower:
// quorum_proxy_test.go.)
func TestQuorumQueueInCluster(t *testing.T) {
	net := raft.NewMemNetwork()
	envs := newQuorumEnvs(t, 2, net)
	if _, err := envs[0].v.DeclareQueue(QueueDef{Name: "q", Durable: true,
		Args: amqpwire.Table{"x-queue-type": "quorum"}}, false); err != nil {
		t.Fatal(err)
	}
	// The first leader found may still hand its lead on (to the
	// preferred member, quorum_placement.go, or in an election under
	// load): then the follower never names it. Pick the leader anew until
	// one serves and the follower knows it.
	var leader, follower *env
	l := -1
	eventually(t, "the follower knows the serving leader", func() bool {
		if l = servingNow(envs, "q"); l < 0 {
			return false
		}
		leader, follower = envs[l], envs[1-l]
		return follower.queueNamed("q").home.Load() == int32(l+1)
	})
	c := newConsumer(-1)
	leader.consume("q", c, false)
	net.Cut(uint64(l+1), uint64(2-l), true)
	res := leader.publish(persistent("", "q", "cut off"))
	if got := c.bodies(); len(got) != 0 {
		t.Fatalf("delivered before its enqueue was committed: %q", got)
	}
	net.Cut(uint64(l+1), uint64(2-l), false)
	waitDurable(t, res)
	eventually(t, "the committed message delivered", func() bool { return len(c.bodies()) == 1 })

	res = follower.publish(persistent("", "q", "forwarded"))
	waitDurable(t, res)
	eventually(t, "the forwarded message delivered", func() bool { return len(c.bodies()) == 2 })
	if got := c.bodies(); got[1] != "forwarded" {
		t.Fatalf("deliveries %q", got)
	}

	// Once both are acked, every replica's log is cut past the first
	// (the forwarded one stays for forwardMemory: a new leader recalls
	// its forward from it).
	for _, d := range c.deliveries() {
		leader.v.Ack("q", d.Tag)
	}
	for i, e := range envs {
		s := e.queueNamed("q").quorum.Load().store
		eventually(t, fmt.Sprintf("node %d's log cut", i+1), func() bool { return s.LogStart() > 0 })
	}

	// Deleted on the follower: gone from every node, files included.
	dirs := []string{leader.queueNamed("q").store.Dir(), follower.queueNamed("q").store.Dir()}
	if _, err := follower.v.DeleteQueue("q", false, false, 1); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		eventually(t, dir+" removed", func() bool { _, err := os.Stat(dir); return os.IsNotExist(err) })
	}
	eventually(t, "the leader's consumer cancelled", func() bool { return c.cancelled.Load() == 1 })
}

// TestQuorumDeliveryLimitAcrossFailover: a message held by a consumer on
// a leader that is cut off is returned by the new leader, which counts
// the return against x-delivery-limit: past it, the message is
// dead-lettered (reason delivery_limit) instead of delivered again.
func TestQuorumDeliveryLimitAcrossFailover(t *testing.T) {
	net := raft.NewMemNetwork()
	envs := newQuorumEnvs(t, 3, net)
	envs[0].declareExchange("dlx", "fanout", true, nil)
	for _, e := range envs { // a transient queue of each node's own
		e.declareQueue("dead", false)
		e.bind("dead", "dlx", "", nil)
	}
	if _, err := envs[0].v.DeclareQueue(QueueDef{Name: "work", Durable: true, Args: amqpwire.Table{
		"x-queue-type": "quorum", "x-delivery-limit": int64(0), "x-dead-letter-exchange": "dlx"}}, false); err != nil {
		t.Fatal(err)
	}
	l := servingNode(t, envs, "work")
	// The consumer holds "once"; "after" stays ready: its prefetch is
	// what its session on the leader may hold.
	c := newConsumer(1)
	sub, err := envs[l].v.Consume("work", ConsumeSpec{Tag: "c", Prefetch: 1, Conn: 1, Consumer: c})
	if err != nil {
		t.Fatal(err)
	}
	sub.Resume()
	waitDurable(t, envs[l].publish(persistent("", "work", "once")))
	eventually(t, "the message delivered", func() bool { return len(c.bodies()) == 1 })
	waitDurable(t, envs[l].publish(persistent("", "work", "after"))) // commits the delivery before it

	isolate(net, len(envs), l, true)
	others := append(append([]*env{}, envs[:l]...), envs[l+1:]...)
	n := others[servingNode(t, others, "work")]
	if got := n.drain("work"); len(got) != 1 || got[0] != "after" {
		t.Fatalf("the new leader's queue: %q, want only %q", got, "after")
	}
	if got := n.drain("dead"); len(got) != 1 || got[0] != "once" {
		t.Fatalf("dead-lettered on the new leader: %q, want %q", got, "once")
	}
}
