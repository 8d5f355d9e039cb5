//go:build linux

package cluster

import (
	"context"
	"testing"
	"time"
)

// startAMQPNetCluster starts a node in each namespace of cn, with an
// AMQP listener on its namespace's address and the test user.
func startAMQPNetCluster(t *testing.T, cn *clusterNet) ([]*node, []string) {
	t.Helper()
	nodes := prepareNetCluster(t, cn)
	addrs := make([]string, len(nodes))
	for i, nd := range nodes {
		addrs[i] = cn.addr(nd.id) + ":5672"
		nd.extraArgs = append([]string{"--amqp-addr", addrs[i]}, faultUserArgs...)
	}
	startAll(nodes)
	return nodes, addrs
}

// declareQuorumQueue declares a quorum queue on the first node and
// returns the node that leads it.
func declareQuorumQueue(t *testing.T, ctx context.Context, nodes []*node, addrs []string, queue string) *node {
	t.Helper()
	conn, ch, err := openChannel(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.drop()
	if _, err := ch.QueueDeclare(queue, true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}
	return nodes[queueLeader(t, ctx, nodes, nil, queue)]
}

// TestAMQPLeaderIsolatedFault (Linux, root): five nodes, each in its own
// network namespace (the clients reach all five over the bridge). The
// leader of a quorum queue and one other node are cut off from the other
// three: the majority elects a new leader and the queues go on there
// (clients at home on the minority's nodes stall, and move when their
// confirms time out or their connection fails); the isolated leader stops
// serving the queue. Then the partition heals.
func TestAMQPLeaderIsolatedFault(t *testing.T) {
	requireFaultRun(t)
	ctx := amqpFaultContext(t)
	cn := newClusterNet(t, 5)
	nodes, addrs := startAMQPNetCluster(t, cn)
	ft := newAMQPFaultTest(ctx, t, nodes, addrs)
	ft.run("leader isolated with a minority", func() {
		old := ft.leader(0)
		minority := []*node{old, without(ft.nodes, old)[0]}
		majority := without(ft.nodes, minority...)
		cn.cut(minority, majority)
		cutAt := time.Now()
		elected := ft.successor(0, old, minority...)
		t.Logf("nodes %d and %d cut off; node %d leads %s %v after the cut", old.id, minority[1].id, elected.id,
			ft.queues[0], time.Since(cutAt).Round(time.Millisecond))
		ft.progress(50, "with the leader cut off")
		ft.waitDeposed(old, 0)
		cn.heal(minority, majority)
		ft.progress(50, "after the partition healed")
	})
}
