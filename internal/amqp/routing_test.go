package amqp

import (
	"slices"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// drain reads every ready message of queue with basic.get and returns
// their routing keys.
func drain(t *testing.T, ch *amqp091.Channel, queue string) []string {
	t.Helper()
	var keys []string
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("get %q: %v", queue, err)
		}
		if !ok {
			return keys
		}
		keys = append(keys, d.RoutingKey)
	}
}

// TestRoutingByExchangeType publishes through each exchange type and checks
// which queues each message reached.
func TestRoutingByExchangeType(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	pub := newConfirmedPublisher(t, b.channel())

	keys := []string{"order.eu.created", "order.eu.shipped", "order.created", "order.us.west.created", "invoice.eu.created"}
	cases := []struct {
		kind     string
		bindings map[string]string // queue -> binding key
		want     map[string][]string
	}{
		{
			kind:     "topic",
			bindings: map[string]string{"star": "order.*.created", "hash": "order.#"},
			want: map[string][]string{
				"star": {"order.eu.created"},
				"hash": {"order.eu.created", "order.eu.shipped", "order.created", "order.us.west.created"},
			},
		},
		{
			kind:     "direct",
			bindings: map[string]string{"d1": "order.eu.created", "d2": "order.created"},
			want:     map[string][]string{"d1": {"order.eu.created"}, "d2": {"order.created"}},
		},
		{
			kind:     "fanout",
			bindings: map[string]string{"f1": "ignored", "f2": ""},
			want:     map[string][]string{"f1": keys, "f2": keys},
		},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			ex := "ex." + tc.kind
			if err := ch.ExchangeDeclare(ex, tc.kind, false, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			for q, key := range tc.bindings {
				q = tc.kind + "." + q
				declareQueue(t, ch, q, false)
				if err := ch.QueueBind(q, key, ex, false, nil); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range keys {
				if !pub.publish(ex, k, amqp091.Publishing{Body: []byte(k)}) {
					t.Fatalf("publish %q nacked", k)
				}
			}
			for q, want := range tc.want {
				if got := drain(t, ch, tc.kind+"."+q); !slices.Equal(got, want) {
					t.Errorf("queue %s got %q, want %q", q, got, want)
				}
			}
		})
	}

	t.Run("headers", func(t *testing.T) {
		if err := ch.ExchangeDeclare("ex.headers", "headers", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		declareQueue(t, ch, "h.all", false)
		declareQueue(t, ch, "h.any", false)
		if err := ch.QueueBind("h.all", "", "ex.headers", false, amqp091.Table{"x-match": "all", "region": "eu", "kind": "order"}); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind("h.any", "", "ex.headers", false, amqp091.Table{"x-match": "any", "region": "eu", "kind": "order"}); err != nil {
			t.Fatal(err)
		}
		msgs := []struct {
			key     string
			headers amqp091.Table
		}{
			{"both", amqp091.Table{"region": "eu", "kind": "order"}},
			{"region-only", amqp091.Table{"region": "eu"}},
			{"neither", amqp091.Table{"region": "us"}},
		}
		for _, m := range msgs {
			if !pub.publish("ex.headers", m.key, amqp091.Publishing{Headers: m.headers}) {
				t.Fatalf("publish %q nacked", m.key)
			}
		}
		if got := drain(t, ch, "h.all"); !slices.Equal(got, []string{"both"}) {
			t.Errorf("x-match all got %q", got)
		}
		if got := drain(t, ch, "h.any"); !slices.Equal(got, []string{"both", "region-only"}) {
			t.Errorf("x-match any got %q", got)
		}
	})

	t.Run("default exchange", func(t *testing.T) {
		declareQueue(t, ch, "by-name", false)
		if !pub.publish("", "by-name", amqp091.Publishing{Body: []byte("x")}) {
			t.Fatal("nacked")
		}
		if got := drain(t, ch, "by-name"); !slices.Equal(got, []string{"by-name"}) {
			t.Errorf("got %q", got)
		}
	})

	t.Run("exchange to exchange", func(t *testing.T) {
		if err := ch.ExchangeDeclare("e2e.src", "topic", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.ExchangeDeclare("e2e.dst", "fanout", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.ExchangeBind("e2e.dst", "order.#", "e2e.src", false, nil); err != nil {
			t.Fatal(err)
		}
		declareQueue(t, ch, "e2e.q", false)
		if err := ch.QueueBind("e2e.q", "", "e2e.dst", false, nil); err != nil {
			t.Fatal(err)
		}
		pub.publish("e2e.src", "order.x", amqp091.Publishing{})
		pub.publish("e2e.src", "invoice.x", amqp091.Publishing{})
		if got := drain(t, ch, "e2e.q"); !slices.Equal(got, []string{"order.x"}) {
			t.Errorf("got %q", got)
		}
	})
}

// TestAlternateExchange: a message the main exchange cannot route goes to
// its alternate exchange and is not returned even when mandatory.
func TestAlternateExchange(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	if err := ch.ExchangeDeclare("ae", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("main", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "ae"}); err != nil {
		t.Fatal(err)
	}
	declareQueue(t, ch, "routed", false)
	declareQueue(t, ch, "unrouted", false)
	if err := ch.QueueBind("routed", "known", "main", false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("unrouted", "", "ae", false, nil); err != nil {
		t.Fatal(err)
	}
	pubCh := b.channel()
	returns := pubCh.NotifyReturn(make(chan amqp091.Return, 2))
	if err := pubCh.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, key := range []string{"known", "unknown"} {
		dc, err := pubCh.PublishWithDeferredConfirmWithContext(ctx, "main", key, true, false, amqp091.Publishing{Body: []byte(key)})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("confirm of %q: ok=%v err=%v", key, ok, err)
		}
	}
	if got := drain(t, ch, "routed"); !slices.Equal(got, []string{"known"}) {
		t.Errorf("routed got %q", got)
	}
	if got := drain(t, ch, "unrouted"); !slices.Equal(got, []string{"unknown"}) {
		t.Errorf("unrouted got %q", got)
	}
	select {
	case r := <-returns:
		t.Errorf("message routed by the alternate exchange was returned: %+v", r)
	default:
	}
}
