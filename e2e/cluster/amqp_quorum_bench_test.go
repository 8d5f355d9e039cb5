package cluster

import (
	"context"
	"flag"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

var quorumThroughput = flag.Int("cluster.quorum-throughput", 0,
	"messages for TestAMQPQuorumQueueThroughput (0: skip it)")

// TestAMQPQuorumQueueThroughput measures (behind -cluster.quorum-throughput
// N) 1 KiB persistent messages published with confirms (256 in flight)
// and consumed with manual acks (prefetch 256, acked in batches) on the
// node leading a quorum queue of three `wharf serve` processes, the same
// through a node that does not lead it (publishes forwarded, deliveries
// pulled from the leader), and on a durable classic queue of one of the
// nodes (no replication). It logs msg/s, first publish to last delivery.
//
//	go test ./e2e/cluster -run AMQPQuorumQueueThroughput -cluster.quorum-throughput 20000 -v
func TestAMQPQuorumQueueThroughput(t *testing.T) {
	if *quorumThroughput <= 0 {
		t.Skip("a measurement: -cluster.quorum-throughput N runs it")
	}
	for _, kind := range []struct {
		name      string
		args      amqp.Table
		elsewhere bool
	}{
		{"quorum queue, 3 nodes", quorumArgs, false},
		{"quorum queue, 3 nodes, client on a node that does not lead", quorumArgs, true},
		{"classic queue, 1 node", nil, false},
	} {
		t.Run(kind.name, func(t *testing.T) {
			rate := queueThroughput(t, kind.args, kind.elsewhere, *quorumThroughput)
			t.Logf("%s: %d messages of 1 KiB, %.0f msg/s", kind.name, *quorumThroughput, rate)
		})
	}
}

// queueThroughput publishes and consumes n messages on the node serving
// a new queue "bench" declared with args (a classic queue: node 1, which
// declares it), or with elsewhere on the next node, and returns messages
// per second.
func queueThroughput(t *testing.T, args amqp.Table, elsewhere bool, n int) float64 {
	nodes, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const queue = "bench"
	if _, err := channel(t, dialAMQP(t, addrs[0])).QueueDeclare(queue, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	const window = 256
	at := 0
	if args["x-queue-type"] == "quorum" {
		at = queueLeader(t, ctx, nodes, nil, queue)
	}
	if elsewhere {
		at = (at + 1) % len(addrs)
	}
	_, deliveries := consumeOn(t, addrs[at], queue, window)
	pub := confirmChannel(t, addrs[at])
	body := make([]byte, 1024)

	start := time.Now()
	consumed := make(chan error, 1)
	go func() {
		for i := 1; i <= n; i++ {
			select {
			case d := <-deliveries:
				if i%64 == 0 || i == n {
					d.Ack(true)
				}
			case <-ctx.Done():
				consumed <- ctx.Err()
				return
			}
		}
		consumed <- nil
	}()
	confs := make([]*amqp.DeferredConfirmation, 0, window)
	for i := range n {
		c, err := pub.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false,
			amqp.Publishing{Body: body, DeliveryMode: amqp.Persistent})
		if err != nil {
			t.Fatal(err)
		}
		confs = append(confs, c)
		if len(confs) == window || i == n-1 {
			for _, c := range confs {
				if acked, err := c.WaitContext(ctx); err != nil || !acked {
					t.Fatalf("confirm: acked %v, %v", acked, err)
				}
			}
			confs = confs[:0]
		}
	}
	if err := <-consumed; err != nil {
		t.Fatal(err)
	}
	return float64(n) / time.Since(start).Seconds()
}
