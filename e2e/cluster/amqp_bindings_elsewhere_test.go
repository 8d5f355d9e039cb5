package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Bindings made on one node, used on another at once (issue 14's
// leftovers): RabbitMQ keeps its bindings in one schema store, so any
// node of its cluster shows, deletes and routes through a binding
// another node just made.

// apiAnswer is apiCall as guest, tried again while the node's HTTP
// listener is not open yet; it returns the status and body.
func (a apiNode) apiAnswer(t *testing.T, ctx context.Context, method, path, body string) (int, string) {
	t.Helper()
	for {
		code, _, data, err := a.apiCall(ctx, guest, method, path, body, nil)
		switch {
		case err == nil:
			return code, string(data)
		case !errors.Is(err, syscall.ECONNREFUSED) || ctx.Err() != nil:
			t.Fatalf("%s %s: %v", method, path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAMQPBindingByPathOnAnyNode: three `wharf serve` processes. A
// binding only node 1 has (from amq.topic to a transient queue a client
// of node 1 declared) is shown and deleted by its full path through node
// 2's management API, after which a message node 1 routes through it is
// returned; a durable binding made through node 1's API is deleted at
// once through node 3's, and is then 404 on node 1 too.
func TestAMQPBindingByPathOnAnyNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startAPICluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	ch := channel(t, dialAMQP(t, nodes[0].amqp))
	if _, err := ch.QueueDeclare("scratch", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("scratch", "k.#", "amq.topic", false, nil); err != nil {
		t.Fatal(err)
	}
	const transient = "/api/bindings/%2F/e/amq.topic/q/scratch/k.%2523" // properties key "k.%23"
	if code, body := nodes[1].apiAnswer(t, ctx, http.MethodGet, transient, ""); code != http.StatusOK ||
		!strings.Contains(body, `"routing_key":"k.#"`) {
		t.Fatalf("GET node 1's binding through node 2: %d %s", code, body)
	}
	for _, want := range []int{http.StatusNoContent, http.StatusNotFound} {
		if code, body := nodes[1].apiAnswer(t, ctx, http.MethodDelete, transient, ""); code != want {
			t.Fatalf("DELETE node 1's binding through node 2: %d %s, want %d", code, body, want)
		}
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, "amq.topic", "k.1", true, false, amqp.Publishing{Body: []byte("m")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conf.WaitContext(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-returns:
	default:
		t.Fatal("a message through the deleted binding was not returned: node 1 still has it")
	}

	for _, step := range []struct {
		node               int
		method, path, body string
		want               int
		what               string
	}{
		{0, http.MethodPut, "/api/queues/%2F/billing", `{"durable":true}`, http.StatusCreated, "declare billing on node 1"},
		{0, http.MethodPost, "/api/bindings/%2F/e/amq.direct/q/billing", `{"routing_key":"new"}`, http.StatusCreated, "bind on node 1"},
		{2, http.MethodDelete, "/api/bindings/%2F/e/amq.direct/q/billing/new", "", http.StatusNoContent, "delete it on node 3 at once"},
		{0, http.MethodGet, "/api/bindings/%2F/e/amq.direct/q/billing/new", "", http.StatusNotFound, "look for it on node 1"},
	} {
		if code, body := nodes[step.node].apiAnswer(t, ctx, step.method, step.path, step.body); code != step.want {
			t.Fatalf("%s: %d %s, want %d", step.what, code, body, step.want)
		}
	}
}

// TestAMQPPublishRightAfterBindElsewhere: a client of node 1 declares a
// durable exchange and queue, a client of node 2 checks the exchange is
// there (a passive declare), node 1's client binds the queue, and right
// after the bind-ok node 2's client publishes through the exchange,
// mandatory and confirmed: every message is routed (none returned) and
// reaches its queue, round after round, though node 2 may not have
// applied the binding yet when the publish comes (it catches up first).
func TestAMQPPublishRightAfterBindElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	_, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	declarer, publisher := channel(t, dialAMQP(t, addrs[0])), channel(t, dialAMQP(t, addrs[1]))
	if err := publisher.Confirm(false); err != nil {
		t.Fatal(err)
	}
	returns := publisher.NotifyReturn(make(chan amqp.Return, 1))
	const rounds = 40
	for i := range rounds {
		x, q := fmt.Sprintf("events-%d", i), fmt.Sprintf("audit-%d", i)
		if err := declarer.ExchangeDeclare(x, "fanout", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := declarer.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := publisher.ExchangeDeclarePassive(x, "fanout", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := declarer.QueueBind(q, "", x, false, nil); err != nil {
			t.Fatal(err)
		}
		publishRouted(t, ctx, publisher, returns, x, "", amqp.Publishing{Body: []byte(q), DeliveryMode: amqp.Persistent})
	}
	for i := range rounds {
		q := fmt.Sprintf("audit-%d", i)
		if d, ok, err := declarer.Get(q, true); err != nil || !ok || string(d.Body) != q {
			t.Fatalf("get from %s: %q %v %v", q, d.Body, ok, err)
		}
	}
}
