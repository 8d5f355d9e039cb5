package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// listedQueue is what /api/queues shows of a queue's figures: nil counts
// for a queue shown without them (state down).
type listedQueue struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Node      string `json:"node"`
	Messages  *int   `json:"messages"`
	Ready     *int   `json:"messages_ready"`
	Unacked   *int   `json:"messages_unacknowledged"`
	Consumers *int   `json:"consumers"`
}

// figures is a listed queue's counts as text, for comparisons and
// messages.
func (q listedQueue) figures() string {
	show := func(n *int) string {
		if n == nil {
			return "-"
		}
		return strconv.Itoa(*n)
	}
	return fmt.Sprintf("%s messages %s ready %s unacked %s consumers %s", q.State, show(q.Messages), show(q.Ready),
		show(q.Unacked), show(q.Consumers))
}

// getAPI decodes the JSON answer of GET path on the node's management
// API into out.
func (a apiNode) getAPI(ctx context.Context, path string, out any) error {
	_, err := a.getAPIHeader(ctx, path, out)
	return err
}

// getAPIHeader is getAPI, and returns the answer's header.
func (a apiNode) getAPIHeader(ctx context.Context, path string, out any) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.http+path, nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return resp.Header, json.NewDecoder(resp.Body).Decode(out)
}

// listedFigures is the figures of every queue in the node's /api/queues,
// by name.
func (a apiNode) listedFigures(ctx context.Context) (map[string]string, error) {
	var qs []listedQueue
	if err := a.getAPI(ctx, "/api/queues", &qs); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(qs))
	for _, q := range qs {
		out[q.Name] = q.figures()
	}
	return out, nil
}

// TestQueueFiguresOnEveryNode: three `wharf serve` processes. A classic
// queue declared on node 2 holds 10 ready messages and 3 unacknowledged
// by a consumer on node 1; three quorum queues (one led by each node,
// placement spreads them) hold 1, 2 and 3 messages. /api/queues on every
// node shows each queue's figures as the node serving it counts them,
// as RabbitMQ's management API does on any node, and /api/overview's and
// /api/vhosts' totals sum them. Node 2 killed -9: node
// 1 lists the classic queue with state down and no figures, each request
// answered within about a second.
func TestQueueFiguresOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startAPICluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	c1, c2 := dialAMQP(t, nodes[0].amqp), dialAMQP(t, nodes[1].amqp)
	if _, err := channel(t, c2).QueueDeclare("ledger", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ch1 := channel(t, c1)
	for i := 1; i <= 3; i++ {
		name := "votes" + strconv.Itoa(i)
		if _, err := ch1.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
		publishClassic(t, ctx, confirmChannel(t, nodes[0].amqp), name, 0, i)
	}
	publishClassic(t, ctx, confirmChannel(t, nodes[0].amqp), "ledger", 0, 13)
	if err := ch1.Qos(3, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch1.Consume("ledger", "node1", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	receiveInOrder(t, ctx, "node 1's consumer of ledger", deliveries, 0, 3, func(int, amqp.Delivery) {})

	want := map[string]string{
		"ledger": "running messages 13 ready 10 unacked 3 consumers 1",
		"votes1": "running messages 1 ready 1 unacked 0 consumers 0",
		"votes2": "running messages 2 ready 2 unacked 0 consumers 0",
		"votes3": "running messages 3 ready 3 unacked 0 consumers 0",
	}
	for _, a := range nodes {
		var last map[string]string
		for {
			got, err := a.listedFigures(ctx)
			if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("node %d's /api/queues: %v; want %v", a.id, last, want)
			}
			last = got
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, a := range nodes { // the totals are the same figures summed: 13 + 1 + 2 + 3
		var overview struct {
			Totals struct{ Messages int } `json:"queue_totals"`
		}
		var vhost struct{ Messages int }
		if err := a.getAPI(ctx, "/api/overview", &overview); err != nil || overview.Totals.Messages != 19 {
			t.Fatalf("node %d's /api/overview queue_totals: %+v, %v; want 19 messages", a.id, overview.Totals, err)
		}
		if err := a.getAPI(ctx, "/api/vhosts/%2F", &vhost); err != nil || vhost.Messages != 19 {
			t.Fatalf("node %d's /api/vhosts/%%2F: %d messages, %v; want 19", a.id, vhost.Messages, err)
		}
	}
	leaders := map[string]bool{}
	for i := 1; i <= 3; i++ {
		var q listedQueue
		if err := nodes[0].getAPI(ctx, "/api/queues/%2F/votes"+strconv.Itoa(i), &q); err != nil {
			t.Fatal(err)
		}
		leaders[q.Node] = true
	}
	if !leaders[wharfName(3)] {
		t.Fatalf("no quorum queue led by node 3: leaders %v", leaders)
	}

	nodes[1].kill()
	killed := time.Now()
	down := "down messages - ready - unacked - consumers -"
	for {
		start := time.Now()
		got, err := nodes[0].listedFigures(ctx)
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Fatalf("/api/queues on node 1 took %v with node 2 dead", took)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got["ledger"] == down {
			t.Logf("node 1 lists ledger as down %v after node 2's kill", time.Since(killed))
			break
		}
		if got["ledger"] != want["ledger"] {
			t.Fatalf("node 1 lists ledger, whose node 2 is dead, as %q", got["ledger"])
		}
		if ctx.Err() != nil {
			t.Fatal("node 1 never listed ledger as down")
		}
	}
	var q listedQueue
	if err := nodes[0].getAPI(ctx, "/api/queues/%2F/ledger", &q); err != nil || q.figures() != down {
		t.Fatalf("GET /api/queues/%%2F/ledger on node 1 with node 2 dead: %q, %v", q.figures(), err)
	}
}
