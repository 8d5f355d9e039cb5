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
// followers (so nothing it logs afterwards reaches them), is asked for a
// confirmed message by a basic.get, and is then killed -9. As in
// RabbitMQ, a quorum queue's leader hands a message out only once its
// assignment (deliver command) is committed: cut off, it must not answer
// the get with the message at all. If it did, the followers' new leader
// must deliver the message again flagged redelivered, with
// x-delivery-count 1 (a consumer gone with its node returns it, counted):
// a consumer that deduplicates on the redelivered flag would otherwise
// process it twice, and x-delivery-limit would not count the attempt.
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
	type got struct {
		d   amqp.Delivery
		ok  bool
		err error
	}
	gets := make(chan got, 1)
	go func() {
		d, ok, err := gch.Get(queue, false)
		gets <- got{d, ok, err}
	}()
	var handedOut bool
	select {
	case g := <-gets:
		handedOut = g.err == nil && g.ok
		t.Logf("basic.get on the cut-off leader, node %d: ok %v, err %v", leader.id, g.ok, g.err)
	case <-time.After(handOutWait):
		t.Logf("basic.get on the cut-off leader, node %d, still waits for its commit", leader.id)
	}
	leader.kill()
	next := nodes[queueLeader(t, ctx, nodes, map[int]bool{leader.id - 1: true}, queue)]
	again := getAgain(t, ctx, addrs[next.id-1], queue)
	count := fmt.Sprint(again.Headers["x-delivery-count"])
	if handedOut {
		t.Errorf("node %d handed the message out while cut off from its followers, before its delivery could commit", leader.id)
		if !again.Redelivered || count != "1" {
			t.Errorf("delivered again by node %d after the failover: redelivered %v, x-delivery-count %s; want true, 1",
				next.id, again.Redelivered, count)
		}
	}
	t.Logf("delivered by node %d after the failover: redelivered %v, x-delivery-count %s", next.id, again.Redelivered, count)
}

// handOutWait is how long a test gives a cut-off leader to (wrongly)
// answer a basic.get with a message: one that could reach its followers
// answers in milliseconds.
const handOutWait = 2 * time.Second

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
