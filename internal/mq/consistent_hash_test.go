package mq

import (
	"fmt"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func TestConsistentHashExchange(t *testing.T) {
	e := newEnv(t)
	wantCode(t, e.v.DeclareExchange(ExchangeDef{Name: "bad", Type: "x-consistent-hash",
		Args: amqpwire.Table{"hash-header": "h", "hash-property": "message_id"}}, false),
		amqpwire.CodePreconditionFailed, "PRECONDITION_FAILED - hash-header and hash-property are mutually exclusive")
	wantCode(t, e.v.DeclareExchange(ExchangeDef{Name: "bad", Type: "x-consistent-hash",
		Args: amqpwire.Table{"hash-property": "user_id"}}, false),
		amqpwire.CodePreconditionFailed, "PRECONDITION_FAILED - Unsupported property: user_id")

	e.declareExchange("orders", "x-consistent-hash", true, nil)
	// Bound out of name order: the definition store returns bindings in
	// key order, but the buckets must come back in binding order.
	queues := []string{"o3", "o1", "o2"}
	for _, q := range queues {
		e.declareQueue(q, true)
		e.bind(q, "orders", "20", nil)
	}
	wantCode(t, e.v.BindQueue("o1", "orders", "heavy", nil, 1), amqpwire.CodePreconditionFailed,
		`PRECONDITION_FAILED - The binding key must be an integer: <<"heavy">>`)

	// Each key always lands in the same queue, and every queue gets some.
	where := func() map[string]string {
		t.Helper()
		at := map[string]string{}
		for i := range 300 {
			key := fmt.Sprintf("customer-%d", i%100)
			if res := e.publish(msg("orders", key, key)); res.Routed != 1 {
				t.Fatalf("key %s routed to %d queues", key, res.Routed)
			}
		}
		for _, q := range queues {
			bodies := e.drain(q)
			if len(bodies) == 0 {
				t.Fatalf("queue %s got nothing", q)
			}
			for _, b := range bodies {
				if prev, seen := at[b]; seen && prev != q {
					t.Fatalf("key %s went to %s and %s", b, prev, q)
				}
				at[b] = q
			}
		}
		return at
	}
	before := where()
	e.restart()
	after := where()
	for k, q := range before {
		if after[k] != q {
			t.Fatalf("after restart key %s goes to %s, before to %s", k, after[k], q)
		}
	}

	// hash-header: the header's value decides, not the routing key.
	e.declareExchange("by-user", "x-consistent-hash", false, amqpwire.Table{"hash-header": "user"})
	for _, q := range queues {
		e.bind(q, "by-user", "10", nil)
	}
	for i := range 50 {
		m := msg("by-user", fmt.Sprintf("rk-%d", i), "")
		m.Properties.Headers = amqpwire.Table{"user": int32(7)}
		e.publish(m)
	}
	got := 0
	for _, q := range queues {
		if n := e.messages(q); n != 0 && n != 50 {
			t.Fatalf("messages of one user spread: %s has %d", q, n)
		} else {
			got += n
		}
	}
	if got != 50 {
		t.Fatalf("%d of 50 routed", got)
	}
}
