//go:build linux

package cluster

import (
	"context"
	"testing"
	"time"
)

// TestAMQPConsumerCutOffBrieflyFault (Linux, root): three nodes in
// network namespaces; a consumer on a node that does not lead a quorum
// queue, its node cut off from the leader for two seconds (long enough
// for the nodes to take each other for down, well short of the 10 s a
// leader keeps a silent node's session) while messages are published on
// the leader. After the partition heals, the consumer must receive every
// confirmed message while it keeps consuming: none may stay held for it
// on the leader without ever reaching it.
func TestAMQPConsumerCutOffBrieflyFault(t *testing.T) {
	requireFaultRun(t)
	ctx := amqpFaultContext(t)
	cn := newClusterNet(t, 3)
	nodes, addrs := startAMQPNetCluster(t, cn)
	const queue = "cut-off"
	h := newTotalQueue([]string{queue})
	leader := declareQuorumQueue(t, ctx, nodes, addrs, queue)
	far := without(nodes, leader)[0]
	consumer, cch, err := openChannel(addrs[far.id-1])
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.drop()
	if err := cch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := cch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { // ends when the connection closes
		for d := range deliveries {
			h.deliver("c", queue, d.Body, d.Redelivered, d.Headers["x-delivery-count"])
			d.Ack(false)
		}
	}()
	publish := func(n int) {
		t.Helper()
		for range n {
			for confirmOne(ctx, h, addrs[leader.id-1], "p", queue) != nil {
				if ctx.Err() != nil {
					t.Fatal("no confirm from the leader")
				}
			}
		}
	}
	publish(5)
	if err := h.waitDrained(ctx); err != nil {
		t.Fatal(err)
	}
	cn.cut([]*node{far}, []*node{leader})
	publish(5) // the pull parked on the leader takes them, and its answer is lost
	select {   // the fault itself: two seconds
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	cn.heal([]*node{far}, []*node{leader})
	publish(5)
	drainCtx, cancel := context.WithTimeout(ctx, drainWait)
	defer cancel()
	if err := h.waitDrained(drainCtx); err != nil {
		h.markStranded()
		for _, nd := range nodes {
			t.Logf("node %d's log:\n%s", nd.id, nd.logTail())
		}
		t.Fatalf("consumer on node %d, cut off from the leader (node %d) for 2 s: %v within %v of the heal: %v",
			far.id, leader.id, err, drainWait, h.verdict().stranded)
	}
	t.Logf("%v", h.verdict())
}
