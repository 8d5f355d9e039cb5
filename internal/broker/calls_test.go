package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
)

// TestNodeCallsBesideTheRemovalQuestion: node calls travel over the
// metadata group, which every node hosts, to the handler of the service
// they name; the removal question (empty data) is answered as before; a
// service without a handler is refused.
func TestNodeCallsBesideTheRemovalQuestion(t *testing.T) {
	c := newTestCluster(t, 2)
	c.broker(2).HandleNodeCalls("echo", func(_ context.Context, from int32, data []byte) ([]byte, error) {
		return append([]byte{byte(from)}, data...), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := c.broker(1).CallNode(ctx, 2, "echo", []byte("hello"))
	if err != nil || string(out) != "\x01hello" {
		t.Fatalf("node call from 1 to 2: %q, %v", out, err)
	}
	group := c.broker(1).meta.raft.Group().ID()
	data, err := c.broker(1).cfg.Cluster.Call(ctx, group, 2, nil)
	var a removalAnswer
	if err != nil || json.Unmarshal(data, &a) != nil || a.Removed {
		t.Fatalf("removal question: %q, %v", data, err)
	}
	if _, err := c.broker(1).CallNode(ctx, 2, "other", nil); err == nil {
		t.Fatal("a call to a service without a handler was answered")
	}
	c.broker(2).HandleNodeCalls("echo", nil)
	if _, err := c.broker(1).CallNode(ctx, 2, "echo", nil); err == nil {
		t.Fatal("a call to a removed handler was answered")
	}
}

// TestNodeCallFailsWhenTheNodeGoes: a node call waiting on a node whose
// connection breaks (its process killed) fails at once with
// raft.ErrUnreachable, not when its context ends, and so does a new call
// while there is no connection; once this node takes the other for down,
// a new call fails at once, whatever the connection.
func TestNodeCallFailsWhenTheNodeGoes(t *testing.T) {
	c := newTestCluster(t, 3)
	asked := make(chan struct{}, 1)
	c.broker(2).HandleNodeCalls("hold", func(ctx context.Context, _ int32, _ []byte) ([]byte, error) {
		asked <- struct{}{}
		<-ctx.Done() // answers only once its node closes
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		<-asked
		c.net.Disconnect(1, 2)
	}()
	start := time.Now()
	_, err := c.broker(1).CallNode(ctx, 2, "hold", nil)
	if !errors.Is(err, raft.ErrUnreachable) {
		t.Fatalf("a node call whose connection broke: %v after %v, want raft.ErrUnreachable", err, time.Since(start))
	}
	start = time.Now()
	_, err = c.broker(1).CallNode(ctx, 2, "hold", nil)
	if took := time.Since(start); !errors.Is(err, raft.ErrUnreachable) || took > time.Second {
		t.Fatalf("a node call to a node with no connection: %v after %v, want raft.ErrUnreachable at once", err, took)
	}

	c.net.Connect(1, 2) // taken for down below without a connection's news
	c.isolate(2, true)
	c.waitFor("node 1 to take node 2 for down", func() bool { return !c.broker(1).NodeUp(2) })
	start = time.Now()
	_, err = c.broker(1).CallNode(ctx, 2, "hold", nil)
	if took := time.Since(start); !errors.Is(err, raft.ErrUnreachable) || took > time.Second {
		t.Fatalf("a node call to a node taken for down: %v after %v, want raft.ErrUnreachable at once", err, took)
	}
}

// deadLeaderTopic creates topic "dead" (one partition, three replicas) on
// c and waits until every node knows the partition's leader; it returns
// the leader and a node that does not lead, holding no replica if one
// such node exists.
func deadLeaderTopic(t *testing.T, c *testCluster) (leader, caller int32) {
	t.Helper()
	if _, err := c.broker(1).CreateTopic(TopicSpec{Name: "dead", Partitions: 1, ReplicationFactor: 3}, false); err != nil {
		t.Fatal(err)
	}
	partition := func(id int32) *Partition {
		tp, err := c.broker(id).Topic("dead")
		if err != nil {
			return nil
		}
		p, _ := tp.Partition(0)
		return p
	}
	c.waitFor("every node to know the partition's leader", func() bool {
		leader = -1
		for _, id := range c.ids {
			p := partition(id)
			if p == nil {
				return false
			}
			l, _, _ := p.Leadership(id)
			if l < 0 || leader >= 0 && l != leader {
				return false
			}
			leader = l
		}
		return true
	})
	for _, id := range c.ids {
		if id != leader && (caller == 0 || !slices.Contains(partition(id).Replicas(), id)) {
			caller = id
		}
	}
	return leader, caller
}

// TestCallLeaderAfterLeaderDies: a partition leader that dies (cut off
// from every node) while a call to it waits is given up as soon as the
// caller sees another leader elected, and the call is answered by that
// one, long before the call's deadline; from a replica of the partition,
// which sees the election, and from a node holding none, which reads the
// new leader's record in the metadata log.
func TestCallLeaderAfterLeaderDies(t *testing.T) {
	for _, nodes := range []int{3, 4} {
		t.Run(fmt.Sprintf("%d nodes", nodes), func(t *testing.T) {
			c := newTestCluster(t, nodes)
			leader, caller := deadLeaderTopic(t, c)
			asked := make(chan struct{}, 1)
			for _, id := range c.ids {
				c.broker(id).HandlePartitionCalls("dead", func(ctx context.Context, p *Partition, data []byte) ([]byte, error) {
					if id == leader { // dies before it answers
						asked <- struct{}{}
						<-ctx.Done()
						return nil, ctx.Err()
					}
					return []byte{byte(id)}, nil
				})
			}
			tp, _ := c.broker(caller).Topic("dead")
			p, _ := tp.Partition(0)
			const deadline = 10 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			go func() {
				<-asked
				c.isolate(leader, true)
			}()
			start := time.Now()
			out, err := p.CallLeader(ctx, []byte("verify"))
			took := time.Since(start)
			if err != nil || len(out) != 1 || int32(out[0]) == leader {
				t.Fatalf("call from node %d to dead leader %d: %q, %v after %v", caller, leader, out, err, took)
			}
			if took > deadline/2 {
				t.Fatalf("the call took %v: it waited on the dead leader", took)
			}
			t.Logf("node %d answered the call from node %d (no replica there: %v) %v after leader %d was cut off",
				out[0], caller, p.CheckLeader() != nil && !slices.Contains(p.Replicas(), caller), took.Round(time.Millisecond), leader)
		})
	}
}

// TestForwardedMarkerAfterLeaderDies: a transaction marker forwarded to a
// partition leader that dies before it answers (cut off, its forward
// lost) is written by the next leader, long before the forward's own
// timeout (markerForwardTimeout).
func TestForwardedMarkerAfterLeaderDies(t *testing.T) {
	c := newTestCluster(t, 3)
	leader, caller := deadLeaderTopic(t, c)
	tp, _ := c.broker(caller).Topic("dead")
	p, _ := tp.Partition(0)
	c.isolate(leader, true) // the caller still takes it for the leader
	if l, _, _ := p.Leadership(caller); l != leader || !c.broker(caller).NodeUp(leader) {
		t.Fatalf("node %d saw leader %d go before the marker was sent (leader %d)", caller, leader, l)
	}
	start := time.Now()
	err := p.WriteTxnMarker(7, 0, true, 0)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("marker forwarded to dead leader %d: %v after %v", leader, err, took)
	}
	if took > markerForwardTimeout/2 {
		t.Fatalf("the marker took %v: it waited on the dead leader", took)
	}
	writer, _, _ := p.Leadership(caller)
	t.Logf("marker written by node %d %v after leader %d was cut off", writer, took.Round(time.Millisecond), leader)
}
