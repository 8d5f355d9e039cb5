package cluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Exclusive queues reached from every node (issue 14): an exclusive queue
// is its connection's alone, but messages published on any node are
// routed to it, as in RabbitMQ. Pub/sub and RPC rest on that.

// publishRouted publishes body to exchange with key through ch, in
// confirm mode, mandatory, and fails unless it is acked and not returned.
func publishRouted(t *testing.T, ctx context.Context, ch *amqp.Channel, returns <-chan amqp.Return,
	exchange, key string, p amqp.Publishing) {
	t.Helper()
	conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, p)
	if err != nil {
		t.Fatal(err)
	}
	if acked, err := conf.WaitContext(ctx); err != nil || !acked {
		t.Fatalf("confirm of %q to %q/%q: acked %v, %v", p.Body, exchange, key, acked, err)
	}
	select {
	case r := <-returns:
		t.Fatalf("%q to %q/%q returned: %d %s", r.Body, exchange, key, r.ReplyCode, r.ReplyText)
	default:
	}
}

// subscribe declares an exclusive server-named queue on conn, binds it to
// exchange and consumes from it (no-ack, exclusive consumer).
func subscribe(t *testing.T, conn *amqp.Connection, exchange string) (string, <-chan amqp.Delivery) {
	t.Helper()
	ch := channel(t, conn)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Name, deliveries
}

// TestAMQPExclusiveQueuesAcrossNodes: subscribers on nodes 2 and 3 bind
// exclusive server-named queues to a fanout exchange and receive every
// message a publisher of node 1 publishes, confirmed; an RPC client of
// node 2 gets the replies of a server on node 3 in its exclusive reply
// queue; a client of another node cannot consume from it (405); when the
// subscriber's connection closes, its queue is gone on every node.
func TestAMQPExclusiveQueuesAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	_, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	// Pub/sub.
	c1 := dialAMQP(t, addrs[0])
	if err := channel(t, c1).ExchangeDeclare("news", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	sub2 := dialAMQP(t, addrs[1])
	q2, d2 := subscribe(t, sub2, "news")
	_, d3 := subscribe(t, dialAMQP(t, addrs[2]), "news")
	pub := confirmChannel(t, addrs[0])
	returns := pub.NotifyReturn(make(chan amqp.Return, 1))
	const n = 100
	for i := range n {
		publishRouted(t, ctx, pub, returns, "news", "", amqp.Publishing{Body: []byte(strconv.Itoa(i))})
	}
	receiveInOrder(t, ctx, "node 2's subscriber", d2, 0, n, func(int, amqp.Delivery) {})
	receiveInOrder(t, ctx, "node 3's subscriber", d3, 0, n, func(int, amqp.Delivery) {})

	// Only its connection may use an exclusive queue, on any node.
	var amqpErr *amqp.Error
	if _, err := channel(t, c1).Consume(q2, "", true, false, false, false, nil); !errors.As(err, &amqpErr) ||
		amqpErr.Code != amqp.ResourceLocked {
		t.Fatalf("consume from node 2's exclusive queue on node 1: %v, want 405", err)
	}

	// RPC: the client on node 2, the server on node 3.
	client := channel(t, dialAMQP(t, addrs[1]))
	reply, err := client.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	replies, err := client.Consume(reply.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	server := confirmChannel(t, addrs[2])
	serverReturns := server.NotifyReturn(make(chan amqp.Return, 1))
	if _, err := server.QueueDeclare("rpc", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	requests, err := server.Consume("rpc", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	clientConfirms := confirmChannel(t, addrs[1])
	clientReturns := clientConfirms.NotifyReturn(make(chan amqp.Return, 1))
	for i := range 20 {
		id := strconv.Itoa(i)
		publishRouted(t, ctx, clientConfirms, clientReturns, "", "rpc",
			amqp.Publishing{Body: []byte(id), ReplyTo: reply.Name, CorrelationId: id})
		var req amqp.Delivery
		select {
		case req = <-requests:
		case <-ctx.Done():
			t.Fatalf("request %d not delivered to the server", i)
		}
		publishRouted(t, ctx, server, serverReturns, "", req.ReplyTo,
			amqp.Publishing{Body: []byte("re " + string(req.Body)), CorrelationId: req.CorrelationId})
		select {
		case d := <-replies:
			if d.CorrelationId != id || string(d.Body) != "re "+id {
				t.Fatalf("reply %d: %q (correlation %q)", i, d.Body, d.CorrelationId)
			}
		case <-ctx.Done():
			t.Fatalf("reply %d not delivered to the client", i)
		}
	}

	// Once node 2's subscriber closed, its queue is gone everywhere.
	if err := sub2.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "node 2's exclusive queue gone on node 1", func() bool {
		_, err := channel(t, c1).QueueDeclarePassive(q2, false, false, true, false, nil)
		return errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound
	})
}

// TestAMQPExclusiveQueueHomeNodeKilled: while the node of a subscriber's
// exclusive queue is down, a publisher on another node still gets its
// confirms (the queue is skipped, another subscriber gets them); once
// that node restarted, its exclusive queue from before is gone on every
// node, as RabbitMQ drops a node's transient queues.
func TestAMQPExclusiveQueueHomeNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	if err := channel(t, dialAMQP(t, addrs[0])).ExchangeDeclare("news", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	gone, _ := subscribe(t, dialAMQP(t, addrs[1]), "news")
	_, d3 := subscribe(t, dialAMQP(t, addrs[2]), "news")
	pub := confirmChannel(t, addrs[0])
	returns := pub.NotifyReturn(make(chan amqp.Return, 1))
	publishRouted(t, ctx, pub, returns, "news", "", amqp.Publishing{Body: []byte("0")})

	// Once node 1 sees node 2 down (a message forwarded as it went is
	// nacked, its outcome unknown, as RabbitMQ nacks one whose queue's
	// node went down), node 2's queue is skipped: every publish is
	// confirmed.
	nodes[1].kill()
	waitFor(t, ctx, "node 1 skips node 2's queue", func() bool {
		conf, err := pub.PublishWithDeferredConfirmWithContext(ctx, "news", "", false, false, amqp.Publishing{Body: []byte("probe")})
		if err != nil {
			t.Fatal(err)
		}
		acked, err := conf.WaitContext(ctx)
		return err == nil && acked
	})
	for i := 1; i < 20; i++ {
		publishRouted(t, ctx, pub, returns, "news", "", amqp.Publishing{Body: []byte(strconv.Itoa(i))})
	}
	numbered := make(chan amqp.Delivery, 20)
	go func() { // ends with node 3's connection, at cleanup
		for d := range d3 {
			if string(d.Body) != "probe" {
				numbered <- d
			}
		}
	}()
	receiveInOrder(t, ctx, "node 3's subscriber", numbered, 0, 20, func(int, amqp.Delivery) {})

	nodes[1].start()
	nodes[1].waitReady()
	var amqpErr *amqp.Error
	for i, addr := range addrs {
		conn := dialAMQP(t, addr)
		waitFor(t, ctx, "node 2's exclusive queue from before its restart gone on node "+strconv.Itoa(i+1), func() bool {
			_, err := channel(t, conn).QueueDeclarePassive(gone, false, false, true, false, nil)
			return errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound
		})
	}
}

// TestAMQPExclusiveQueueOfRemovedNode: a subscriber on node 4 holds an
// exclusive queue named "sub" (405 to a declare of that name on node 1);
// node 4 is killed and removed for good (`wharf cluster remove-node`; four
// nodes, so that three are left to hold __consumer_offsets' replicas).
// Its exclusive queue's records go with it: a client of node 1 declares
// "sub" again and gets what a publisher of node 2 publishes to the
// exchange the old one was bound to.
func TestAMQPExclusiveQueueOfRemovedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four broker processes")
	}
	nodes, addrs := startAMQPCluster(t, 4)
	logsOnFailure(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c1 := dialAMQP(t, addrs[0])
	if err := channel(t, c1).ExchangeDeclare("news", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ch4 := channel(t, dialAMQP(t, addrs[3]))
	if _, err := ch4.QueueDeclare("sub", false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch4.QueueBind("sub", "", "news", false, nil); err != nil {
		t.Fatal(err)
	}
	declareSub := func() error {
		ch := channel(t, c1)
		if _, err := ch.QueueDeclare("sub", false, true, true, false, nil); err != nil {
			return err
		}
		return ch.QueueBind("sub", "", "news", false, nil)
	}
	var amqpErr *amqp.Error
	if err := declareSub(); !errors.As(err, &amqpErr) || amqpErr.Code != amqp.ResourceLocked {
		t.Fatalf("node 1 declares node 4's exclusive queue's name: %v, want 405", err)
	}

	removed := nodes[3]
	removed.kill()
	out, err := exec.CommandContext(ctx, removed.bin, "cluster", "remove-node", fmt.Sprint(removed.id),
		"--bootstrap-server", nodes[0].kafkaAddr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("Node %d removed", removed.id)) {
		t.Fatalf("wharf cluster remove-node %d while it is down: %v\n%s", removed.id, err, out)
	}
	waitFor(t, ctx, "node 1 declares the name of node 4's exclusive queue", func() bool {
		err := declareSub()
		if err != nil && (!errors.As(err, &amqpErr) || amqpErr.Code != amqp.ResourceLocked) {
			t.Fatalf("node 1's declare of the name: %v", err)
		}
		return err == nil
	})
	sub := channel(t, c1)
	deliveries, err := sub.Consume("sub", "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := confirmChannel(t, addrs[1])
	returns := pub.NotifyReturn(make(chan amqp.Return, 1))
	publishRouted(t, ctx, pub, returns, "news", "", amqp.Publishing{Body: []byte("0")})
	receiveInOrder(t, ctx, "node 1's new subscriber", deliveries, 0, 1, func(int, amqp.Delivery) {})
}
