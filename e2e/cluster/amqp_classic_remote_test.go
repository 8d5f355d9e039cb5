package cluster

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Classic queues reached from every node (issue 14): a durable classic
// queue lives on the node that declared it; clients of the other nodes
// publish to it, consume, get and purge it there, as RabbitMQ 4 lets
// them.

// publishClassic publishes persistent messages from..to-1 (their bodies
// the numbers) to queue through ch, in confirm mode, and fails unless
// every one is acked.
func publishClassic(t *testing.T, ctx context.Context, ch *amqp.Channel, queue string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false,
			amqp.Publishing{Body: []byte(strconv.Itoa(i)), DeliveryMode: amqp.Persistent})
		if err != nil {
			t.Fatal(err)
		}
		if acked, err := conf.WaitContext(ctx); err != nil || !acked {
			t.Fatalf("confirm of message %d: acked %v, %v", i, acked, err)
		}
	}
}

// receiveInOrder takes the messages from..to-1 (their bodies the
// numbers) from deliveries, in order, and hands each to check (which may
// settle it); it fails at one out of order, or once ctx ends.
func receiveInOrder(t *testing.T, ctx context.Context, what string, deliveries <-chan amqp.Delivery, from, to int,
	check func(i int, d amqp.Delivery)) {
	t.Helper()
	for i := from; i < to; i++ {
		select {
		case d := <-deliveries:
			if string(d.Body) != strconv.Itoa(i) {
				t.Fatalf("%s: delivery %d is %q", what, i, d.Body)
			}
			check(i, d)
		case <-ctx.Done():
			t.Fatalf("%s: %d of %d messages", what, i-from, to-from)
		}
	}
}

// homeCounts is what a passive declare on the queue's home node reports.
func homeCounts(t *testing.T, conn *amqp.Connection, queue string) (messages, consumers int) {
	t.Helper()
	ch := channel(t, conn)
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("passive declare of %s on its home node: %v", queue, err)
	}
	return q.Messages, q.Consumers
}

// TestAMQPClassicQueueAnywhere: a classic queue declared on node 2 takes
// confirmed messages published on node 1; a client of node 3 gets,
// nacks (requeue) and acks through it, consumes the rest in order, each
// once, and purges it; the home node's queue follows each step.
func TestAMQPClassicQueueAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	_, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	c2, c3 := dialAMQP(t, addrs[1]), dialAMQP(t, addrs[2])
	if _, err := channel(t, c2).QueueDeclare("ledger", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	const n = 300
	ch1 := confirmChannel(t, addrs[0])
	if q, err := ch1.QueueDeclarePassive("ledger", true, false, false, false, nil); err != nil || q.Messages != 0 {
		t.Fatalf("passive declare on node 1: %+v, %v", q, err)
	}
	publishClassic(t, ctx, ch1, "ledger", 0, n)
	if m, _ := homeCounts(t, c2, "ledger"); m != n {
		t.Fatalf("home node holds %d messages, want %d", m, n)
	}
	if q, err := channel(t, c3).QueueDeclarePassive("ledger", true, false, false, false, nil); err != nil || q.Messages != n {
		t.Fatalf("passive declare on node 3: %+v, %v; want the home node's %d messages", q, err, n)
	}

	// basic.get on node 3, nacked back to the queue, then got again
	// (redelivered) and acked.
	ch3 := channel(t, c3)
	d, ok, err := ch3.Get("ledger", false)
	if err != nil || !ok || string(d.Body) != "0" || d.Redelivered {
		t.Fatalf("basic.get on node 3: %q ok %v redelivered %v, %v", d.Body, ok, d.Redelivered, err)
	}
	if m, _ := homeCounts(t, c2, "ledger"); m != n-1 {
		t.Fatalf("home node holds %d ready messages with one got, want %d", m, n-1)
	}
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the nacked message back on the home node", func() bool { m, _ := homeCounts(t, c2, "ledger"); return m == n })
	d, ok, err = ch3.Get("ledger", false)
	if err != nil || !ok || string(d.Body) != "0" || !d.Redelivered {
		t.Fatalf("basic.get on node 3 after the nack: %q ok %v redelivered %v, %v", d.Body, ok, d.Redelivered, err)
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}

	// A consumer on node 3 takes the rest, in order, each once.
	if err := ch3.Qos(50, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch3.Consume("ledger", "node3", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	receiveInOrder(t, ctx, "node 3's consumer", deliveries, 1, n, func(i int, d amqp.Delivery) {
		if d.Redelivered {
			t.Fatalf("delivery %d on node 3 redelivered", i)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	})
	// Once its consumer is gone on the home node (its session ended,
	// after its acks), the home node holds nothing: every ack reached it.
	if err := ch3.Cancel("node3", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "node 3's consumer gone on the home node", func() bool { _, c := homeCounts(t, c2, "ledger"); return c == 0 })
	if m, _ := homeCounts(t, c2, "ledger"); m != 0 {
		t.Fatalf("home node holds %d messages after node 3 acked them all", m)
	}
	for d := range deliveries { // closed by the cancel
		t.Fatalf("delivered more than once: %q", d.Body)
	}

	// Purged from node 3.
	publishClassic(t, ctx, ch1, "ledger", n, n+10)
	if purged, err := channel(t, c3).QueuePurge("ledger", false); err != nil || purged != 10 {
		t.Fatalf("queue.purge on node 3: %d, %v; want 10", purged, err)
	}
	if m, _ := homeCounts(t, c2, "ledger"); m != 0 {
		t.Fatalf("home node holds %d messages after the purge", m)
	}
}

// TestAMQPClassicQueueConsumerDropped: a consumer on node 3 of a classic
// queue on node 2 holds unacknowledged messages when its connection
// drops (TCP closed, no connection.close): the home node returns them,
// and they are delivered again, redelivered, first.
func TestAMQPClassicQueueConsumerDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	_, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	c2 := dialAMQP(t, addrs[1])
	if _, err := channel(t, c2).QueueDeclare("jobs", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	const n, held = 50, 20
	ch1 := confirmChannel(t, addrs[0])
	if _, err := ch1.QueueDeclarePassive("jobs", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publishClassic(t, ctx, ch1, "jobs", 0, n)

	var raw net.Conn
	c3, err := amqp.DialConfig("amqp://guest:guest@"+addrs[2]+"/", amqp.Config{Dial: func(network, addr string) (net.Conn, error) {
		conn, err := net.Dial(network, addr)
		raw = conn
		return conn, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	ch3 := channel(t, c3)
	if err := ch3.Qos(held, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch3.Consume("jobs", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	receiveInOrder(t, ctx, "node 3's consumer", deliveries, 0, held, func(int, amqp.Delivery) {})
	raw.Close() // the connection drops with every delivery unacknowledged
	waitFor(t, ctx, "node 3's consumer gone on the home node, what it held returned", func() bool {
		m, c := homeCounts(t, c2, "jobs")
		return m == n && c == 0
	})

	ch2 := channel(t, c2)
	again, err := ch2.Consume("jobs", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	receiveInOrder(t, ctx, "node 2's consumer after node 3's dropped", again, 0, n, func(i int, d amqp.Delivery) {
		if d.Redelivered != (i < held) {
			t.Fatalf("delivery %d on node 2: redelivered %v; want the %d held by node 3 first, redelivered", i, d.Redelivered, held)
		}
		d.Ack(false)
	})
}

// TestAMQPClassicQueueHomeNodeKilled: a classic queue on node 2 holds
// confirmed messages; node 2 is killed (SIGKILL). On node 1 a declare
// (passive or not), a consume, a get and a purge answer RabbitMQ's 404
// for a queue whose home node is down; a message published to it is, as
// in RabbitMQ, not routed there (mandatory: basic.return 312 NO_ROUTE;
// its confirm an ack); node 3's consumer of it is cancelled. Once node 2
// is back, the queue and its confirmed messages are reachable again from
// node 3.
func TestAMQPClassicQueueHomeNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	if _, err := channel(t, dialAMQP(t, addrs[1])).QueueDeclare("archive", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	const n = 100
	c1 := dialAMQP(t, addrs[0])
	ch1 := channel(t, c1)
	if err := ch1.Confirm(false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch1.QueueDeclarePassive("archive", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publishClassic(t, ctx, ch1, "archive", 0, n)

	// A consumer on node 3 that takes nothing (prefetch 1, the first
	// delivery never acked) is cancelled when node 2 goes.
	c3 := dialAMQP(t, addrs[2])
	ch3 := channel(t, c3)
	if err := ch3.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	cancelled := ch3.NotifyCancel(make(chan string, 1))
	if _, err := ch3.Consume("archive", "watcher", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	nodes[1].kill()
	const down = "home node 'wharf@2' of durable queue 'archive' in vhost '/' is down or inaccessible"
	select {
	case tag := <-cancelled:
		if tag != "watcher" {
			t.Fatalf("basic.cancel for %q", tag)
		}
	case <-ctx.Done():
		t.Fatal("node 3's consumer of node 2's queue was not cancelled when node 2 went down")
	}
	_, err := channel(t, c1).QueueDeclarePassive("archive", true, false, false, false, nil)
	wantAMQPError(t, "passive queue.declare on node 1 while node 2 is down", err, amqp.NotFound, down)
	_, err = channel(t, c1).QueueDeclare("archive", true, false, false, false, nil)
	wantAMQPError(t, "queue.declare on node 1 while node 2 is down", err, amqp.NotFound, down)
	_, err = channel(t, c1).Consume("archive", "", false, false, false, false, nil)
	wantAMQPError(t, "basic.consume on node 1 while node 2 is down", err, amqp.NotFound, down)
	_, _, err = channel(t, c1).Get("archive", false)
	wantAMQPError(t, "basic.get on node 1 while node 2 is down", err, amqp.NotFound, down)
	_, err = channel(t, c1).QueuePurge("archive", false)
	wantAMQPError(t, "queue.purge on node 1 while node 2 is down", err, amqp.NotFound, down)

	returns := ch1.NotifyReturn(make(chan amqp.Return, 1))
	conf, err := ch1.PublishWithDeferredConfirmWithContext(ctx, "", "archive", true, false,
		amqp.Publishing{Body: []byte("while down"), DeliveryMode: amqp.Persistent})
	if err != nil {
		t.Fatal(err)
	}
	if acked, err := conf.WaitContext(ctx); err != nil || !acked {
		t.Fatalf("confirm of a message to a queue whose node is down: acked %v, %v; RabbitMQ acks it (unroutable)", acked, err)
	}
	select {
	case r := <-returns:
		if r.ReplyCode != amqp.NoRoute {
			t.Fatalf("basic.return %d %s, want 312 NO_ROUTE", r.ReplyCode, r.ReplyText)
		}
	case <-ctx.Done():
		t.Fatal("no basic.return of a mandatory message to a queue whose node is down")
	}

	nodes[1].start()
	nodes[1].waitReady()
	var q amqp.Queue
	waitFor(t, ctx, "node 2's queue reachable from node 3 again", func() bool {
		ch := channel(t, c3)
		defer ch.Close()
		q, err = ch.QueueDeclarePassive("archive", true, false, false, false, nil)
		return err == nil
	})
	if q.Messages != n {
		t.Fatalf("node 2's queue after its restart, seen from node 3: %d messages, want the %d confirmed", q.Messages, n)
	}
	deliveries, err := channel(t, c3).Consume("archive", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	receiveInOrder(t, ctx, "node 3 after node 2's restart", deliveries, 0, n, func(_ int, d amqp.Delivery) { d.Ack(false) })
}
