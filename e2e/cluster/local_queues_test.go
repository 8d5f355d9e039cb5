package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestLocalQueuesOnEveryNode: three `wharf serve` processes; a client on
// node 1 declares an exclusive queue holding 3 messages and a transient
// exchange, which only node 1 has (they are not replicated definitions).
// Node 3 lists them as RabbitMQ does on any node: the queue with its node
// and figures in /api/queues, /api/queues/%2F and
// /api/queues/%2F/{name}, the exchange in /api/exchanges and
// /api/exchanges/%2F/{name}, the binding between them in /api/bindings/%2F
// and the queue's and exchange's bindings, and both in /api/overview's
// object_totals, which match node 1's. Once the client is gone, so is the
// queue.
func TestLocalQueuesOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startAPICluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	c1 := dialAMQP(t, nodes[0].amqp)
	ch := channel(t, c1)
	if _, err := ch.QueueDeclare("scratch", false, false, true, false, amqp.Table{"x-max-length": int32(100)}); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("events", "topic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("scratch", "k.#", "events", false, nil); err != nil { // from a transient exchange: not recorded
		t.Fatal(err)
	}
	for range 3 {
		if err := ch.PublishWithContext(ctx, "", "scratch", false, false, amqp.Publishing{Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
	}

	type shownQueue struct {
		listedQueue
		Exclusive bool           `json:"exclusive"`
		Durable   bool           `json:"durable"`
		Args      map[string]any `json:"arguments"`
	}
	show := func(q shownQueue) string {
		return fmt.Sprintf("%s on %s exclusive %v durable %v %v %s", q.Name, q.Node, q.Exclusive, q.Durable, q.Args, q.figures())
	}
	want := fmt.Sprintf("scratch on %s exclusive true durable false map[x-max-length:100] running messages 3 ready 3 unacked 0 consumers 0", wharfName(1))
	node3 := nodes[2]
	for _, path := range []string{"/api/queues", "/api/queues/%2F"} {
		eventually(ctx, t, "node 3 lists node 1's exclusive queue in "+path, func() error {
			var qs []shownQueue
			unanswered, err := node3.apiGet(ctx, guest, path, &qs)
			if err == nil && (len(qs) != 1 || show(qs[0]) != want || unanswered != "") {
				err = fmt.Errorf("%s lists %+v, unanswered %q; want %s", path, qs, unanswered, want)
			}
			return err
		})
	}
	var q shownQueue
	if _, err := node3.apiGet(ctx, guest, "/api/queues/%2F/scratch", &q); err != nil || show(q) != want {
		t.Fatalf("GET /api/queues/%%2F/scratch on node 3: %s, %v; want %s", show(q), err, want)
	}

	type shownExchange struct {
		Name    string `json:"name"`
		Durable bool   `json:"durable"`
	}
	var xs []shownExchange
	if _, err := node3.apiGet(ctx, guest, "/api/exchanges/%2F", &xs); err != nil ||
		!slices.Contains(xs, shownExchange{Name: "events"}) {
		t.Fatalf("node 3's /api/exchanges/%%2F: %+v, %v; want node 1's transient events among them", xs, err)
	}
	var x struct{ Name, Type string }
	if _, err := node3.apiGet(ctx, guest, "/api/exchanges/%2F/events", &x); err != nil || x.Type != "topic" {
		t.Fatalf("GET /api/exchanges/%%2F/events on node 3: %+v, %v", x, err)
	}
	type shownBinding struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
		Key         string `json:"routing_key"`
	}
	bound := shownBinding{"events", "scratch", "k.#"} // node 1's alone
	for path, want := range map[string][]shownBinding{
		"/api/queues/%2F/scratch/bindings":          {{"", "scratch", "scratch"}, bound},
		"/api/exchanges/%2F/events/bindings/source": {bound},
	} {
		var bs []shownBinding
		if _, err := node3.apiGet(ctx, guest, path, &bs); err != nil || !slices.Equal(bs, want) {
			t.Fatalf("GET %s on node 3: %+v, %v; want %+v", path, bs, err, want)
		}
	}
	var all []shownBinding
	if _, err := node3.apiGet(ctx, guest, "/api/bindings/%2F", &all); err != nil || !slices.Contains(all, bound) {
		t.Fatalf("node 3's /api/bindings/%%2F: %+v, %v; want node 1's %+v among them", all, err, bound)
	}
	type objectTotals struct {
		Totals struct{ Queues, Exchanges int } `json:"object_totals"`
	}
	var on1, on3 objectTotals
	if _, err := nodes[0].apiGet(ctx, guest, "/api/overview", &on1); err != nil {
		t.Fatal(err)
	}
	if _, err := node3.apiGet(ctx, guest, "/api/overview", &on3); err != nil || on3 != on1 || on3.Totals.Queues != 1 {
		t.Fatalf("node 3's object_totals %+v, %v; node 1's %+v, want 1 queue", on3.Totals, err, on1.Totals)
	}

	c1.Close()
	eventually(ctx, t, "node 3 no longer lists the exclusive queue of a closed connection", func() error {
		var qs []shownQueue
		_, err := node3.apiGet(ctx, guest, "/api/queues", &qs)
		if err == nil && len(qs) != 0 {
			err = fmt.Errorf("node 3 lists %+v", qs)
		}
		return err
	})
}
