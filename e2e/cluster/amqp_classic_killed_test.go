package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestAMQPClassicHomeKilledFailsFast: node 3's consumer of a classic
// queue living on node 2 has a call in flight there (its session's pull,
// which waits for a delivery), and a client of node 1 gets from the queue
// in a loop, when node 2 is killed -9. The consumer is cancelled and the
// get answered RabbitMQ's 404 "home node ... is down or inaccessible" as
// soon as the other nodes see their connections to node 2 break, well
// before their failure detectors would take it for down (half the
// election timeout, which the test sets to 3 s so that the two are told
// apart on a loaded machine); the test logs both delays.
func TestAMQPClassicHomeKilledFailsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes, addrs := prepareAMQPCluster(t, 3)
	for _, nd := range nodes {
		nd.extraArgs = append(nd.extraArgs, "--election-timeout", slowElection.String())
	}
	startAll(nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if _, err := channel(t, dialAMQP(t, addrs[1])).QueueDeclare("far", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	// Node 3's consumer holds one message unacked and waits in its next
	// pull on node 2.
	c1, c3 := dialAMQP(t, addrs[0]), dialAMQP(t, addrs[2])
	ch1 := channel(t, c1)
	if err := ch1.Confirm(false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch1.QueueDeclarePassive("far", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publishClassic(t, ctx, ch1, "far", 0, 1)
	ch3 := channel(t, c3)
	cancelled := ch3.NotifyCancel(make(chan string, 1))
	deliveries, err := ch3.Consume("far", "held", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	receiveInOrder(t, ctx, "node 3's consumer", deliveries, 0, 1, func(int, amqp.Delivery) {})
	ch1.Close()

	// Node 1's client gets in a loop: the queue is empty (node 3 holds
	// its one message), so a get is a call to node 2 and back.
	got := make(chan error, 1)
	var gets atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		ch, err := c1.Channel()
		if err != nil {
			got <- err
			return
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := ch.Get("far", false); err != nil {
				got <- err
				return
			}
			gets.Add(1)
		}
	}()
	waitFor(t, ctx, "node 1's gets", func() bool { return gets.Load() >= 3 })

	killed := time.Now()
	nodes[1].kill()
	var cancelledAfter, getAfter time.Duration
	for cancelledAfter == 0 || getAfter == 0 {
		select {
		case tag := <-cancelled:
			cancelledAfter = time.Since(killed)
			if tag != "held" {
				t.Fatalf("basic.cancel for %q", tag)
			}
		case err := <-got:
			getAfter = time.Since(killed)
			wantAMQPError(t, "basic.get on node 1 as node 2 is killed", err, amqp.NotFound,
				"home node 'wharf@2' of durable queue 'far' in vhost '/' is down or inaccessible")
		case <-ctx.Done():
			t.Fatalf("after node 2's kill: consumer cancelled after %v, get refused after %v (0: not yet)", cancelledAfter, getAfter)
		}
	}
	t.Logf("kill -9 of the queue's node: node 3's consumer cancelled after %v, node 1's get refused after %v", cancelledAfter, getAfter)
	if cancelledAfter > killedNodeBound || getAfter > killedNodeBound {
		t.Fatalf("kill -9 of the queue's node: consumer cancelled after %v, get refused after %v; want both within %v",
			cancelledAfter, getAfter, killedNodeBound)
	}
}

// slowElection is the nodes' --election-timeout: their failure
// detectors take a silent node for down after half of it.
const slowElection = 3 * time.Second

// killedNodeBound is how soon a client of a queue on a node killed -9
// hears of it: well under the failure detector's delay.
const killedNodeBound = slowElection / 4
