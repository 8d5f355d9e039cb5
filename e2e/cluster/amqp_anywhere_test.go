package cluster

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// servedHere matches a node's log line saying it serves a quorum queue
// from a term on, or no longer serves it (internal/mq/quorum_cluster.go).
var servedHere = regexp.MustCompile(`msg="mq: quorum queue (served here|no longer served here)" .*queue=(\S+) .*?(?:term=(\d+))?$`)

// queueLeader waits until a node not in down says it serves queue, and
// returns its index: of those whose last word on the queue is that they
// serve it, the one with the latest term.
func queueLeader(t *testing.T, ctx context.Context, nodes []*node, down map[int]bool, queue string) int {
	t.Helper()
	leader, _ := queueLeaderAbove(t, ctx, nodes, down, queue, -1)
	return leader
}

// queueLeaderAbove is queueLeader for a leader of a term above term (a
// node killed while it led last said it served the queue, in its term),
// and returns that leader's term too.
func queueLeaderAbove(t *testing.T, ctx context.Context, nodes []*node, down map[int]bool, queue string, term int) (int, int) {
	t.Helper()
	for {
		best, bestTerm := -1, term
		for i, nd := range nodes {
			if down[i] {
				continue
			}
			if serving, term := nd.lastWordOn(queue); serving && term > bestTerm {
				best, bestTerm = i, term
			}
		}
		if best >= 0 {
			return best, bestTerm
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no node serves %q from a term above %d", queue, term)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// lastWordOn is what the node's log last said of queue: whether it serves
// it, and from which term.
func (nd *node) lastWordOn(queue string) (serving bool, term int) {
	b, _ := os.ReadFile(nd.logPath)
	for _, line := range strings.Split(string(b), "\n") {
		m := servedHere.FindStringSubmatch(line)
		if m == nil || m[2] != queue {
			continue
		}
		serving = m[1] == "served here"
		term, _ = strconv.Atoi(m[3])
	}
	return serving, term
}

// consumption is what a consumer received, by message number.
type consumption struct {
	mu          sync.Mutex
	got         map[int]int // deliveries of each message
	redelivered map[int]string
	total       int
}

func (c *consumption) add(i int, d amqp.Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[i]++
	c.total++
	if d.Redelivered {
		c.redelivered[i] = fmt.Sprint(d.Headers["x-delivery-count"])
	}
}

func (c *consumption) has(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[i] > 0
}

func (c *consumption) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

// TestAMQPConsumeAnywhere: the test. A quorum queue over three
// `wharf serve` processes; a client publishes with confirms on a node
// that does not lead it, another consumes on the third node (neither
// leads: the publishes are forwarded to the leader, the consumer pulls
// through it). Mid-stream the leader is killed -9. The publisher keeps
// getting confirms from the new leader, the consumer keeps consuming with
// no cancel nor error, every confirmed message is consumed (lost = 0),
// and the deliveries the consumer held unacknowledged at the kill come
// back redelivered with x-delivery-count 1.
func TestAMQPConsumeAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const queue = "anywhere"
	if _, err := channel(t, dialAMQP(t, addrs[0])).QueueDeclare(queue, true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}
	declared := time.Now()
	leader := queueLeader(t, ctx, nodes, nil, queue)
	publisher, consumer := (leader+1)%3, (leader+2)%3
	t.Logf("node %d leads %q; publishing on node %d, consuming on node %d", leader+1, queue, publisher+1, consumer+1)

	// The consumer acks at once, except for messages 100 to 109, which it
	// holds until the leader is killed.
	const holdFrom, holdTo = 100, 110
	ch := channel(t, dialAMQP(t, addrs[consumer]))
	if err := ch.Qos(50, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("basic.consume on node %d, which does not lead: %v", consumer+1, err)
	}
	cancelled := ch.NotifyCancel(make(chan string, 1))
	got := &consumption{got: map[int]int{}, redelivered: map[int]string{}}
	killed := make(chan struct{})
	resumed := make(chan time.Time, 1) // the first redelivery after the kill: the new leader's
	go func() {
		var held []amqp.Delivery
		afterKill := false
		for {
			select {
			case d, ok := <-deliveries:
				if !ok {
					return
				}
				if afterKill && d.Redelivered {
					resumed <- time.Now()
					afterKill = false
				}
				i, _ := strconv.Atoi(string(d.Body))
				got.add(i, d)
				if i >= holdFrom && i < holdTo && !d.Redelivered {
					held = append(held, d)
					continue
				}
				d.Ack(false)
			case <-killed:
				for _, d := range held { // tags of the dead leader's session: acking them does nothing
					d.Ack(false)
				}
				held, killed, afterKill = nil, nil, true
			}
		}
	}()

	confirmed := &confirmedSet{ids: map[int]bool{}}
	pctx, stopPublishing := context.WithCancel(ctx)
	published := make(chan error, 1)
	go func() {
		published <- publishConfirmed(pctx, confirmChannel(t, addrs[publisher]), queue, 0, 1000000, confirmed)
	}()
	// Publishing goes on past the held deliveries (windows of 20): the
	// commit of what follows covers their deliver commands.
	waitFor(t, ctx, "the held ones consumed", func() bool { return got.has(holdTo - 1) })
	afterHeld := confirmed.len() + 60
	waitFor(t, ctx, "300 confirmed", func() bool { return confirmed.len() >= max(300, afterHeld) })
	t.Logf("%d confirmed, %d consumed before the kill, %v after the declare", confirmed.len(), got.count(),
		time.Since(declared).Round(time.Millisecond))
	nodes[leader].kill()
	killedAt := time.Now()
	close(killed)
	atKill := confirmed.len()
	newLeader := queueLeader(t, ctx, nodes, map[int]bool{leader: true}, queue)
	t.Logf("node %d leads after the kill; %d confirmed at the kill", newLeader+1, atKill)
	waitFor(t, ctx, "a confirm after the kill", func() bool { return confirmed.len() > atKill })
	t.Logf("first confirm %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	waitFor(t, ctx, "200 more confirmed after the kill", func() bool { return confirmed.len() >= atKill+200 })
	stopPublishing()
	t.Logf("publisher stopped %v after the kill: %v", time.Since(killedAt).Round(time.Millisecond), <-published)

	confirmed.mu.Lock()
	want := make([]int, 0, len(confirmed.ids))
	for i := range confirmed.ids {
		want = append(want, i)
	}
	confirmed.mu.Unlock()
	defer func() { t.Logf("all consumed %v after the kill", time.Since(killedAt).Round(time.Millisecond)) }()
	waitFor(t, ctx, "every confirmed message consumed", func() bool {
		for _, i := range want {
			if !got.has(i) {
				return false
			}
		}
		return true
	})
	select {
	case tag := <-cancelled:
		t.Fatalf("the consumer on node %d was cancelled (%s)", consumer+1, tag)
	default:
	}
	got.mu.Lock()
	defer got.mu.Unlock()
	for i := holdFrom; i < holdTo; i++ {
		if count, ok := got.redelivered[i]; !ok || count != "1" {
			t.Errorf("message %d, held at the kill: redelivered %v, x-delivery-count %s; want true, 1", i, ok, count)
		}
	}
	t.Logf("confirmed %d (%d after the kill), consumed %d distinct in %d deliveries, lost 0, %d redelivered; "+
		"first redelivery %v after the kill", len(want), len(want)-atKill, len(got.got), got.total, len(got.redelivered),
		(<-resumed).Sub(killedAt).Round(time.Millisecond))
}

// TestAMQPDeliveryLimitAnywhere: a delivery-limit + dead-letter retry
// ladder, consumed on a node that does not lead, counts every attempt
// across a kill -9 of the leader: rejected (requeue) once, held at the
// kill (returned by the new leader: the second attempt), rejected once
// more: past x-delivery-limit 2 it is dead-lettered, reason
// delivery_limit, with x-delivery-count 2 on its last delivery.
func TestAMQPDeliveryLimitAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	setup := channel(t, dialAMQP(t, addrs[0]))
	if err := setup.ExchangeDeclare("dlx", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.QueueDeclare("dead", true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}
	if err := setup.QueueBind("dead", "", "dlx", false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.QueueDeclare("work", true, false, false, false, amqp.Table{
		"x-queue-type": "quorum", "x-delivery-limit": int64(2), "x-dead-letter-exchange": "dlx"}); err != nil {
		t.Fatal(err)
	}
	leader := queueLeader(t, ctx, nodes, nil, "work")
	on := (leader + 1) % 3
	if err := publishConfirmed(ctx, confirmChannel(t, addrs[(leader+2)%3]), "work", 7, 8, &confirmedSet{ids: map[int]bool{}}); err != nil {
		t.Fatal(err)
	}
	ch := channel(t, dialAMQP(t, addrs[on]))
	deliveries, err := ch.Consume("work", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// next returns the next delivery of message 7, acking the others.
	next := func(what string) amqp.Delivery {
		t.Helper()
		for {
			select {
			case d := <-deliveries:
				if string(d.Body) == "7" {
					return d
				}
				d.Ack(false)
			case <-ctx.Done():
				t.Fatalf("%s: no delivery", what)
			}
		}
	}
	count := func(d amqp.Delivery) string { return fmt.Sprint(d.Headers["x-delivery-count"]) }
	if d := next("first attempt"); d.Redelivered {
		t.Fatalf("first delivery redelivered, x-delivery-count %s", count(d))
	} else if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	if d := next("second attempt"); !d.Redelivered || count(d) != "1" {
		t.Fatalf("second delivery: redelivered %v, x-delivery-count %s; want true, 1", d.Redelivered, count(d))
	}
	// Held at the kill: the new leader returns it, which counts. (A
	// message confirmed after the delivery commits its deliver command.)
	if err := publishConfirmed(ctx, confirmChannel(t, addrs[on]), "work", 8, 9, &confirmedSet{ids: map[int]bool{}}); err != nil {
		t.Fatal(err)
	}
	nodes[leader].kill()
	newLeader := queueLeader(t, ctx, nodes, map[int]bool{leader: true}, "work")
	t.Logf("node %d led %q and was killed; node %d leads now; consuming on node %d", leader+1, "work", newLeader+1, on+1)
	d := next("third attempt")
	if !d.Redelivered || count(d) != "2" {
		t.Fatalf("after the failover: redelivered %v, x-delivery-count %s; want true, 2", d.Redelivered, count(d))
	}
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	getter := channel(t, dialAMQP(t, addrs[on]))
	dead, _, err := getter.Get("dead", true)
	for ; err == nil && dead.Body == nil; dead, _, err = getter.Get("dead", true) {
		if ctx.Err() != nil {
			t.Fatal("nothing dead-lettered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	deaths, _ := dead.Headers["x-death"].([]any)
	if string(dead.Body) != "7" || len(deaths) == 0 || fmt.Sprint(deaths[0].(amqp.Table)["reason"]) != "delivery_limit" {
		t.Fatalf("dead-lettered %q with x-death %v; want \"7\", reason delivery_limit", dead.Body, dead.Headers["x-death"])
	}
	select {
	case d := <-deliveries:
		if string(d.Body) == "7" {
			t.Fatalf("delivered again past the limit: redelivered %v, x-delivery-count %s", d.Redelivered, count(d))
		}
	default:
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
