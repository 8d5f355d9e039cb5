package httpapi_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestReplayDeadLetters dead-letters messages from a work queue (routed
// there by a topic exchange, one with a CC key) into a dead-letter queue
// with its own routing key, then moves them back with one call: each
// arrives in the work queues its original keys route to, with its
// x-death history, and leaves the dead-letter queue. A message that
// never died stays, and so does one whose exchange is gone.
func TestReplayDeadLetters(t *testing.T) {
	a, n := newAPI(t)
	ch := channel(t, dial(t, n, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ch.ExchangeDeclare("orders", "topic", true, false, false, false, nil))
	must(ch.ExchangeDeclare("dlx", "direct", true, false, false, false, nil))
	must(ch.ExchangeDeclare("gone", "fanout", true, false, false, false, nil))
	for _, q := range []string{"work", "audit", "dlq"} {
		args := amqp.Table{}
		if q != "dlq" {
			args = amqp.Table{"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "dead"}
		}
		_, err := ch.QueueDeclare(q, true, false, false, false, args)
		must(err)
	}
	must(ch.QueueBind("work", "order.*", "orders", false, nil))
	must(ch.QueueBind("audit", "audit.#", "orders", false, nil))
	must(ch.QueueBind("dlq", "dead", "dlx", false, nil))
	must(ch.QueueBind("work", "", "gone", false, nil))
	pub := func(exchange, key string, headers amqp.Table) {
		t.Helper()
		must(ch.PublishWithContext(ctx, exchange, key, false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Headers: headers, Body: []byte(key)}))
	}
	pub("orders", "order.created", amqp.Table{"CC": []any{"audit.orders"}})
	pub("orders", "order.paid", nil)
	pub("gone", "x", nil)
	// Reject all four copies (two in work, one in audit, the fanout's
	// in work) without requeue: they go to dlq.
	for _, q := range []string{"work", "audit"} {
		deliveries, err := ch.Consume(q, "rejecter-"+q, false, false, false, false, nil)
		must(err)
		want := map[string]int{"work": 3, "audit": 1}[q]
		for range want {
			select {
			case d := <-deliveries:
				must(d.Nack(false, false))
			case <-ctx.Done():
				t.Fatal("no delivery")
			}
		}
		must(ch.Cancel("rejecter-"+q, false))
	}
	must(ch.ExchangeDelete("gone", false, false))
	pub("", "dlq", nil) // never died
	waitUntil(t, "five messages in dlq", func() bool { return num(get[obj](a, "/api/queues/%2F/dlq"), "messages") == 5 })

	body := a.want(200, "POST", "/api/queues/%2F/dlq/replay-dead-letters", `{}`)
	var got struct{ Moved, Kept, Failed int }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Moved != 3 || got.Kept != 1 || got.Failed != 1 {
		t.Fatalf("replay: %s", body)
	}
	waitUntil(t, "the dlq to settle", func() bool {
		q := get[obj](a, "/api/queues/%2F/dlq")
		return num(q, "messages_ready") == 2 && num(q, "messages_unacknowledged") == 0
	})
	// Both copies of order.created went back to work and, by their CC
	// key, to audit; order.paid to work.
	bodies := map[string][]string{}
	for _, q := range []string{"work", "audit"} {
		for {
			d, ok, err := ch.Get(q, true)
			must(err)
			if !ok {
				break
			}
			if deaths, _ := d.Headers["x-death"].([]any); len(deaths) == 0 {
				t.Errorf("%s: %s came back without its x-death history", q, d.Body)
			}
			bodies[q] = append(bodies[q], string(d.Body))
		}
	}
	if len(bodies["work"]) != 3 || len(bodies["audit"]) != 2 {
		t.Fatalf("after the replay: %v", bodies)
	}
}
