package cluster

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// quorumArgs declare a quorum queue.
var quorumArgs = amqp.Table{"x-queue-type": "quorum"}

// consumeOnLeader starts a consumer (prefetch) of queue on the node that
// leads it (queueLeader; nodes in down are skipped), and returns the
// leader's index, its connection and the deliveries.
func consumeOnLeader(t *testing.T, ctx context.Context, nodes []*node, addrs []string, down map[int]bool, queue string, prefetch int) (int, *amqp.Connection, <-chan amqp.Delivery) {
	t.Helper()
	leader := queueLeader(t, ctx, nodes, down, queue)
	conn, deliveries := consumeOn(t, addrs[leader], queue, prefetch)
	return leader, conn, deliveries
}

// consumeOn starts a consumer (prefetch, manual acks) of queue on the
// node at addr.
func consumeOn(t *testing.T, addr, queue string, prefetch int) (*amqp.Connection, <-chan amqp.Delivery) {
	t.Helper()
	conn := dialAMQP(t, addr)
	ch := channel(t, conn)
	if err := ch.Qos(prefetch, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("basic.consume on %s: %v", addr, err)
	}
	return conn, deliveries
}

// confirmedSet is the messages a publisher got confirms for.
type confirmedSet struct {
	mu  sync.Mutex
	ids map[int]bool
}

func (c *confirmedSet) add(i int) {
	c.mu.Lock()
	c.ids[i] = true
	c.mu.Unlock()
}

// countFrom counts the confirmed messages numbered from on.
func (c *confirmedSet) countFrom(from int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for i := range c.ids {
		if i >= from {
			n++
		}
	}
	return n
}

func (c *confirmedSet) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ids)
}

// publishConfirmed publishes messages from..to-1 (bodies are their
// numbers) in windows of 20 and records the confirmed ones; it stops at
// the first failure (the node was killed) and returns it.
func publishConfirmed(ctx context.Context, ch *amqp.Channel, queue string, from, to int, confirmed *confirmedSet) error {
	const window = 20
	for i := from; i < to; i += window {
		var confs []*amqp.DeferredConfirmation
		for j := i; j < min(i+window, to); j++ {
			c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false,
				amqp.Publishing{Body: []byte(strconv.Itoa(j)), DeliveryMode: amqp.Persistent})
			if err != nil {
				return err
			}
			confs = append(confs, c)
		}
		for k, c := range confs {
			acked, err := c.WaitContext(ctx)
			if err != nil {
				return err
			}
			if !acked {
				return fmt.Errorf("message %d nacked", i+k)
			}
			confirmed.add(i + k)
		}
	}
	return nil
}

// TestAMQPQuorumQueueFailover: a quorum queue over three `wharf serve`
// processes. A client consumes on the node that leads it (found from the
// nodes' logs); messages published with confirms on a node that does not
// lead are forwarded to the leader. On the leader:
// publish with confirms, consume with manual acks, hold some deliveries
// unacknowledged, keep publishing (there, and through a node that does not
// lead) and kill -9 the leader. A client on
// the new leader consumes every confirmed message not acked before the
// kill, and those published on the other survivor after it; the held
// ones come back with redelivered and x-delivery-count 1. lost = 0. The
// killed node rejoins at its restart and takes publishes again.
func TestAMQPQuorumQueueFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const queue = "orders"
	if _, err := channel(t, dialAMQP(t, addrs[0])).QueueDeclare(queue, true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}

	const prefetch = 20
	leader, _, deliveries := consumeOnLeader(t, ctx, nodes, addrs, nil, queue, prefetch)
	t.Logf("node %d leads %q", leader+1, queue)
	other := (leader + 1) % len(addrs)

	// Half of the first messages are published on a node that does not
	// lead: it forwards them to the leader and confirms once committed.
	confirmed := &confirmedSet{ids: map[int]bool{}}
	const first = 200
	if err := publishConfirmed(ctx, confirmChannel(t, addrs[other]), queue, 0, first/2, confirmed); err != nil {
		t.Fatalf("publishing on node %d, which does not lead: %v", other+1, err)
	}
	pub := confirmChannel(t, addrs[leader])
	if err := publishConfirmed(ctx, pub, queue, first/2, first, confirmed); err != nil {
		t.Fatal(err)
	}

	// Ack the first 100, then hold a prefetch's worth unacknowledged.
	acked, held := map[int]bool{}, map[int]bool{}
	for len(acked)+len(held) < 100+prefetch {
		select {
		case d := <-deliveries:
			i, _ := strconv.Atoi(string(d.Body))
			if len(acked) < 100 {
				acked[i] = true
				d.Ack(false)
			} else {
				held[i] = true
			}
		case <-ctx.Done():
			t.Fatalf("%d acked, %d held before the kill", len(acked), len(held))
		}
	}

	// Keep publishing, and kill the leader mid-stream once more messages
	// were confirmed (their commit covers the deliveries held: the log
	// is one order).
	done := make(chan error, 1)
	go func() { done <- publishConfirmed(ctx, pub, queue, first, 100000, confirmed) }()
	// Meanwhile another client publishes through a node that does not
	// lead, until the failover is over.
	const forwardedFrom = 500000
	fctx, stopForwarding := context.WithCancel(ctx)
	forwarded := make(chan error, 1)
	go func() {
		forwarded <- publishConfirmed(fctx, confirmChannel(t, addrs[other]), queue, forwardedFrom, forwardedFrom+100000, confirmed)
	}()
	for confirmed.len() < first+60 || confirmed.countFrom(forwardedFrom) < 60 {
		select {
		case err := <-done:
			t.Fatalf("publishing before the kill: %v", err)
		case err := <-forwarded:
			t.Fatalf("publishing through node %d before the kill: %v", other+1, err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	nodes[leader].kill()
	t.Logf("publisher stopped: %v", <-done)

	newLeader, _, deliveries := consumeOnLeader(t, ctx, nodes, addrs, map[int]bool{leader: true}, queue, 500)
	t.Logf("node %d leads %q after node %d was killed", newLeader+1, queue, leader+1)
	stopForwarding()
	t.Logf("publisher on node %d stopped: %v (%d confirmed through it)", other+1, <-forwarded, confirmed.countFrom(forwardedFrom))
	survivor := 3 - leader - newLeader // the third node
	const extra = 1000000              // bodies of the messages published after the failover
	if err := publishConfirmed(ctx, confirmChannel(t, addrs[survivor]), queue, extra, extra+50, confirmed); err != nil {
		t.Fatalf("publishing on node %d after the failover: %v", survivor+1, err)
	}
	confirmed.mu.Lock()
	want := map[int]bool{}
	for i := range confirmed.ids {
		if !acked[i] {
			want[i] = true
		}
	}
	total := len(confirmed.ids)
	confirmed.mu.Unlock()
	redelivered := 0
	for missing := len(want); missing > 0; {
		select {
		case d := <-deliveries:
			i, err := strconv.Atoi(string(d.Body))
			if err != nil {
				t.Fatalf("unexpected message %q", d.Body)
			}
			if d.Redelivered {
				redelivered++
			}
			if held[i] {
				if count := fmt.Sprint(d.Headers["x-delivery-count"]); !d.Redelivered || count != "1" {
					t.Errorf("message %d was held unacknowledged at the kill: redelivered %v, x-delivery-count %s; want true, 1",
						i, d.Redelivered, count)
				}
				delete(held, i)
			}
			if want[i] {
				delete(want, i)
				missing--
			}
			d.Ack(false)
		case <-ctx.Done():
			t.Fatalf("confirmed %d, lost %d (first missing: %v)\n%s", total, missing, firstKeys(want, 5), nodes[newLeader].logTail())
		}
	}
	if len(held) > 0 {
		t.Errorf("held messages not delivered again: %v", firstKeys(held, 5))
	}
	t.Logf("confirmed %d, acked before the kill %d, lost 0, redelivered %d", total, len(acked), redelivered)

	// The killed node comes back as a member: a publish on it reaches
	// the queue wherever it is led now (a consumer cancelled by a leader
	// move consumes again where the queue is led then).
	nodes[leader].start()
	nodes[leader].waitReady()
	// Until it hears from the leader, the node may nack: the client
	// publishes again, as a client does on a nack.
	back := &confirmedSet{ids: map[int]bool{}}
	restarted := confirmChannel(t, addrs[leader])
	nacks := 0
	for back.len() == 0 {
		if err := publishConfirmed(ctx, restarted, queue, 2*extra, 2*extra+1, back); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("publishing on node %d after its restart: %v\n%s", leader+1, err, nodes[leader].logTail())
			}
			nacks++
		}
	}
	t.Logf("confirmed on the restarted node %d after %d nacks", leader+1, nacks)
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				_, _, deliveries = consumeOnLeader(t, ctx, nodes, addrs, nil, queue, 500)
				continue
			}
			d.Ack(false)
			if string(d.Body) == strconv.Itoa(2*extra) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("the message published on the restarted node %d was not consumed", leader+1)
		}
	}
}

// confirmChannel opens a channel in confirm mode on the node at addr.
func confirmChannel(t *testing.T, addr string) *amqp.Channel {
	t.Helper()
	ch := channel(t, dialAMQP(t, addr))
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return ch
}

func firstKeys(m map[int]bool, n int) []int {
	var out []int
	for k := range m {
		if len(out) == n {
			break
		}
		out = append(out, k)
	}
	return out
}
