//go:build linux

package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestAMQPDeliveredBeforeFailoverFault (Linux, root): three nodes in
// network namespaces. A quorum queue's leader, cut off from both
// followers (so nothing it logs afterwards reaches them), hands a
// confirmed message to a basic.get, and is then killed -9. The
// followers elect a new leader, which must deliver the
// message again flagged redelivered, with x-delivery-count 1, as
// RabbitMQ does (a quorum queue's leader hands a message out only once
// its assignment is committed; a consumer gone with its node returns
// it, counted). A consumer that deduplicates on the redelivered flag
// would otherwise process it twice, and x-delivery-limit would not count
// the attempt.
func TestAMQPDeliveredBeforeFailoverFault(t *testing.T) {
	requireFaultRun(t)
	ctx := amqpFaultContext(t)
	cn := newClusterNet(t, 3)
	nodes, addrs := startAMQPNetCluster(t, cn)
	const queue = "handed-out"
	leader := declareQuorumQueue(t, ctx, nodes, addrs, queue)
	h := newTotalQueue([]string{queue})
	for confirmOne(ctx, h, addrs[leader.id-1], "p", queue) != nil {
		if ctx.Err() != nil {
			t.Fatal("no confirm")
		}
	}
	getter, gch, err := openChannel(addrs[leader.id-1])
	if err != nil {
		t.Fatal(err)
	}
	defer getter.drop()

	followers := without(nodes, leader)
	cn.cut([]*node{leader}, followers)
	d, ok, err := gch.Get(queue, false)
	if err != nil || !ok {
		t.Fatalf("basic.get on the leader, node %d, right after it was cut off: %v, %v", leader.id, ok, err)
	}
	t.Logf("node %d handed out %q cut off from its followers; killing it", leader.id, d.Body)
	leader.kill()
	next := nodes[queueLeader(t, ctx, nodes, map[int]bool{leader.id - 1: true}, queue)]
	again := getAgain(t, ctx, addrs[next.id-1], queue)
	if count := fmt.Sprint(again.Headers["x-delivery-count"]); !again.Redelivered || count != "1" {
		t.Errorf("delivered again by node %d after the failover: redelivered %v, x-delivery-count %s; want true, 1",
			next.id, again.Redelivered, count)
	}
}

// getAgain polls the queue with basic.get on the node at addr until a
// message comes.
func getAgain(t *testing.T, ctx context.Context, addr, queue string) amqp.Delivery {
	t.Helper()
	conn, ch, err := openChannel(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.drop()
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("basic.get: %v", err)
		}
		if ok {
			return d
		}
		select {
		case <-ctx.Done():
			t.Fatal("the message was not delivered again")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
