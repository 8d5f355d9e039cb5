package cluster

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// startAMQPCluster starts n nodes with AMQP listeners (amqpAddrs[i] is
// node i+1's) and waits for their Kafka ports.
func startAMQPCluster(t *testing.T, n int) (nodes []*node, amqpAddrs []string) {
	t.Helper()
	nodes, amqpAddrs = prepareAMQPCluster(t, n)
	for _, nd := range nodes {
		nd.start()
	}
	for _, nd := range nodes {
		nd.waitReady()
	}
	return nodes, amqpAddrs
}

// dialAMQP connects as guest, retrying while the node is still starting
// (its AMQP port opens after its Kafka port).
func dialAMQP(t *testing.T, addr string) *amqp.Connection {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := amqp.Dial("amqp://guest:guest@" + addr + "/")
		if err == nil {
			t.Cleanup(func() { conn.Close() })
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func channel(t *testing.T, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// wantAMQPError checks that err is the channel error code with text in its
// reason.
func wantAMQPError(t *testing.T, what string, err error, code int, text string) {
	t.Helper()
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != code || !strings.Contains(ae.Reason, text) {
		t.Fatalf("%s: %v, want %d containing %q", what, err, code, text)
	}
}

// TestAMQPDefinitionsClusterWide: three `wharf serve` processes. What one
// node declares (exchange, durable queue, binding) the others see at once
// (passive declares on node 3 right after the declare-ok on node 1); a
// queue lives on the node that declared it, and a message routed to it
// on another node is confirmed once it is there. A deletion on one node
// reaches the others.
func TestAMQPDefinitionsClusterWide(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	_, addrs := startAMQPCluster(t, 3)
	c1, c2, c3 := dialAMQP(t, addrs[0]), dialAMQP(t, addrs[1]), dialAMQP(t, addrs[2])

	ch1 := channel(t, c1)
	if err := ch1.ExchangeDeclare("orders", "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch1.QueueDeclare("billing", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch1.QueueBind("billing", "order.*", "orders", false, nil); err != nil {
		t.Fatal(err)
	}

	// At once on node 3: no waiting between node 1's declare-ok and these.
	ch3 := channel(t, c3)
	if err := ch3.ExchangeDeclarePassive("orders", "topic", true, false, false, false, nil); err != nil {
		t.Fatalf("passive exchange.declare on node 3: %v", err)
	}
	if _, err := ch3.QueueDeclarePassive("billing", true, false, false, false, nil); err != nil {
		t.Fatalf("passive queue.declare on node 3: %v", err)
	}
	// A redeclaration with other properties is inequivalent there too.
	_, err := ch3.QueueDeclare("billing", false, false, false, false, nil)
	wantAMQPError(t, "inequivalent queue.declare on node 3", err, amqp.PreconditionFailed, "inequivalent arg 'durable'")

	// The queue lives on node 1; node 2 reaches it there.
	ch2 := channel(t, c2)
	if err := ch2.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Node 2 learns of node 1's binding as it applies it, one replication
	// round trip after bind-ok (RabbitMQ's Khepri projections are updated
	// the same way): until then the message is unroutable, which the
	// mandatory flag makes visible as a basic.return. Once routed, it is
	// confirmed once node 1 has it.
	returns := ch2.NotifyReturn(make(chan amqp.Return, 16))
	for attempt := 1; ; attempt++ {
		conf, err := ch2.PublishWithDeferredConfirmWithContext(ctx, "orders", "order.new", true, false,
			amqp.Publishing{Body: []byte("from node 2"), DeliveryMode: amqp.Persistent})
		if err != nil {
			t.Fatal(err)
		}
		acked, err := conf.WaitContext(ctx)
		returned := false
		select {
		case <-returns:
			returned = true
		default:
		}
		if err != nil || !acked {
			t.Fatalf("confirm of a message routed to node 1's queue from node 2: acked %v, %v", acked, err)
		}
		if returned && attempt < 50 {
			time.Sleep(20 * time.Millisecond) // the binding is on its way to node 2
			continue
		}
		if returned {
			t.Fatal("node 2 never routed to node 1's queue")
		}
		break
	}
	if m, ok, err := ch1.Get("billing", true); err != nil || !ok || string(m.Body) != "from node 2" {
		t.Fatalf("basic.get on node 1 of node 2's message: %q %v %v", m.Body, ok, err)
	}

	// On node 1 it is an ordinary queue.
	if err := ch1.Confirm(false); err != nil {
		t.Fatal(err)
	}
	conf, err := ch1.PublishWithDeferredConfirmWithContext(ctx, "orders", "order.new", false, false,
		amqp.Publishing{Body: []byte("on node 1"), DeliveryMode: amqp.Persistent})
	if err != nil {
		t.Fatal(err)
	}
	if acked, err := conf.WaitContext(ctx); err != nil || !acked {
		t.Fatalf("confirm on node 1: acked %v, %v", acked, err)
	}
	if m, ok, err := ch1.Get("billing", true); err != nil || !ok || string(m.Body) != "on node 1" {
		t.Fatalf("basic.get on node 1: %q %v %v", m.Body, ok, err)
	}

	// Deleted on node 3, gone on node 1 (as soon as node 1 applied it).
	if _, err := channel(t, c3).QueueDelete("billing", false, false, false); err != nil {
		t.Fatal(err)
	}
	for {
		ch := channel(t, c1)
		_, err := ch.QueueDeclarePassive("billing", true, false, false, false, nil)
		if err != nil {
			wantAMQPError(t, "passive queue.declare on node 1 after the delete", err, amqp.NotFound, "no queue 'billing'")
			break
		}
		ch.Close()
		if ctx.Err() != nil {
			t.Fatal("node 1 still has the queue node 3 deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAMQPHomeNodeKilled: a durable queue on node 1 takes confirmed
// messages; node 1 is killed with SIGKILL. Meanwhile the other nodes
// still know the queue and answer RabbitMQ's 404 for a queue whose home
// node is down; once node 1 is back, every confirmed message is there,
// consumed through node 1.
func TestAMQPHomeNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ch := channel(t, dialAMQP(t, addrs[0]))
	if _, err := ch.QueueDeclare("jobs", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "jobs", false, false,
			amqp.Publishing{Body: []byte(strconv.Itoa(i)), DeliveryMode: amqp.Persistent})
		if err != nil {
			t.Fatal(err)
		}
		if acked, err := conf.WaitContext(ctx); err != nil || !acked {
			t.Fatalf("confirm %d: acked %v, %v", i, acked, err)
		}
	}
	t.Logf("%d confirmed", n)
	nodes[0].kill()

	_, err := channel(t, dialAMQP(t, addrs[1])).Consume("jobs", "", false, false, false, false, nil)
	wantAMQPError(t, "basic.consume on node 2 while node 1 is down", err, amqp.NotFound, "home node 'wharf@1'")

	t.Logf("node 2 answered")
	nodes[0].start()
	nodes[0].waitReady()
	ch = channel(t, dialAMQP(t, addrs[0]))
	t.Logf("node 1 back")
	if q, err := ch.QueueDeclarePassive("jobs", true, false, false, false, nil); err != nil || q.Messages != n {
		t.Fatalf("node 1 after its restart: %+v, %v; want %d messages\n%s", q, err, n, nodes[0].logTail())
	}
	deliveries, err := ch.Consume("jobs", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case d := <-deliveries:
			if string(d.Body) != strconv.Itoa(i) {
				t.Fatalf("message %d: %q", i, d.Body)
			}
			d.Ack(false)
		case <-ctx.Done():
			t.Fatalf("%d of %d confirmed messages after node 1's restart", i, n)
		}
	}
}
