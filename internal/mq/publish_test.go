package mq

import (
	"slices"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// routed publishes and returns, per queue, the bodies it now holds.
func (e *env) routedTo(m *Message, queues ...string) map[string][]string {
	e.t.Helper()
	e.publish(m)
	out := map[string][]string{}
	for _, q := range queues {
		if got := e.drain(q); len(got) > 0 {
			out[q] = got
		}
	}
	return out
}

func wantRouted(t *testing.T, got map[string][]string, want ...string) {
	t.Helper()
	var names []string
	for q, bodies := range got {
		if len(bodies) != 1 {
			t.Errorf("queue %s got %d copies", q, len(bodies))
		}
		names = append(names, q)
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("routed to %v, want %v", names, want)
	}
}

func TestRoutingByExchangeType(t *testing.T) {
	e := newEnv(t)
	qs := []string{"created", "orders", "all", "any", "allh", "fan1", "fan2", "direct"}
	for _, q := range qs {
		e.declareQueue(q, false)
	}
	e.declareExchange("t", "topic", false, nil)
	e.bind("created", "t", "order.*.created", nil)
	e.bind("orders", "t", "order.#", nil)
	e.bind("all", "t", "#", nil)
	wantRouted(t, e.routedTo(msg("t", "order.eu.created", "1"), qs...), "created", "orders", "all")
	wantRouted(t, e.routedTo(msg("t", "order", "2"), qs...), "orders", "all")
	wantRouted(t, e.routedTo(msg("t", "order.eu.west.created", "3"), qs...), "orders", "all")
	wantRouted(t, e.routedTo(msg("t", "invoice", "4"), qs...), "all")

	e.bind("any", "amq.headers", "", amqpwire.Table{"x-match": "any", "a": "1", "b": "2"})
	e.bind("allh", "amq.headers", "", amqpwire.Table{"x-match": "all", "a": "1", "b": "2"})
	hm := func(h amqpwire.Table) *Message {
		m := msg("amq.headers", "ignored", "h")
		m.Properties.Headers = h
		return m
	}
	wantRouted(t, e.routedTo(hm(amqpwire.Table{"a": "1"}), qs...), "any")
	wantRouted(t, e.routedTo(hm(amqpwire.Table{"a": "1", "b": "2", "c": "3"}), qs...), "any", "allh")
	wantRouted(t, e.routedTo(hm(amqpwire.Table{"c": "3"}), qs...))

	e.bind("fan1", "amq.fanout", "a", nil)
	e.bind("fan2", "amq.fanout", "b", nil)
	wantRouted(t, e.routedTo(msg("amq.fanout", "zzz", "f"), qs...), "fan1", "fan2")

	e.bind("direct", "amq.direct", "k", nil)
	e.bind("direct", "amq.direct", "k2", nil)
	wantRouted(t, e.routedTo(msg("amq.direct", "k", "d"), qs...), "direct")
	wantRouted(t, e.routedTo(msg("amq.direct", "K", "d"), qs...))

	// The default exchange reaches every queue by name.
	for _, q := range qs {
		wantRouted(t, e.routedTo(msg("", q, "by name"), qs...), q)
	}
}

func TestPublishErrorsAndUnroutable(t *testing.T) {
	e := newEnv(t)
	_, err := e.v.Publish(msg("nope", "k", "x"))
	wantCode(t, err, amqpwire.CodeNotFound, "NOT_FOUND - no exchange 'nope' in vhost '/'")
	if err := e.v.DeclareExchange(ExchangeDef{Name: "int", Type: "fanout", Internal: true}, false); err != nil {
		t.Fatal(err)
	}
	_, err = e.v.Publish(msg("int", "k", "x"))
	wantCode(t, err, amqpwire.CodeAccessRefused, "ACCESS_REFUSED - cannot publish to internal exchange 'int' in vhost '/'")

	before := e.v.Unroutable()
	if res := e.publish(msg("amq.direct", "nobody", "x")); res.Routed != 0 || res.Durable.Pending() {
		t.Errorf("unroutable publish result %+v", res)
	}
	if res := e.publish(msg("", "no-such-queue", "x")); res.Routed != 0 {
		t.Errorf("default exchange to a missing queue: %+v", res)
	}
	if got := e.v.Unroutable() - before; got != 2 {
		t.Errorf("unroutable counter +%d, want +2", got)
	}
	e.declareQueue("q", false)
	if res := e.publish(msg("", "q", "x")); res.Routed != 1 || res.Durable.Pending() {
		t.Errorf("transient publish result %+v", res)
	}
}

func TestExchangeToExchangeBindings(t *testing.T) {
	e := newEnv(t)
	v := e.v
	for _, q := range []string{"q1", "q2", "q3"} {
		e.declareQueue(q, false)
	}
	e.declareExchange("a", "topic", false, nil)
	e.declareExchange("b", "fanout", false, nil)
	e.declareExchange("c", "direct", false, nil)
	if err := v.BindExchange("b", "a", "logs.#", nil); err != nil {
		t.Fatal(err)
	}
	if err := v.BindExchange("c", "a", "#", nil); err != nil {
		t.Fatal(err)
	}
	e.bind("q1", "b", "", nil)
	e.bind("q2", "c", "logs.x", nil)
	e.bind("q3", "a", "logs.x", nil)
	// q1 via b, q2 via c, q3 directly.
	wantRouted(t, e.routedTo(msg("a", "logs.x", "1"), "q1", "q2", "q3"), "q1", "q2", "q3")
	wantRouted(t, e.routedTo(msg("a", "other", "2"), "q1", "q2", "q3"))

	// Diamond: two routes from a to q1 (via b and via c) deliver once.
	e.bind("q1", "c", "logs.x", nil)
	wantRouted(t, e.routedTo(msg("a", "logs.x", "3"), "q1", "q2", "q3"), "q1", "q2", "q3")

	// Cycle: b -> a -> b ... terminates, every queue once.
	if err := v.BindExchange("a", "b", "", nil); err != nil {
		t.Fatal(err)
	}
	if err := v.BindExchange("b", "b", "", nil); err != nil { // self-loop too
		t.Fatal(err)
	}
	wantRouted(t, e.routedTo(msg("b", "logs.x", "4"), "q1", "q2", "q3"), "q1", "q2", "q3")

	if err := v.UnbindExchange("c", "a", "#", nil); err != nil {
		t.Fatal(err)
	}
	wantRouted(t, e.routedTo(msg("a", "logs.x", "5"), "q1", "q2", "q3"), "q1", "q3")

	// Internal exchanges can be destinations.
	if err := v.DeclareExchange(ExchangeDef{Name: "i", Type: "fanout", Internal: true}, false); err != nil {
		t.Fatal(err)
	}
	if err := v.BindExchange("i", "amq.fanout", "", nil); err != nil {
		t.Fatal(err)
	}
	e.bind("q2", "i", "", nil)
	wantRouted(t, e.routedTo(msg("amq.fanout", "", "6"), "q1", "q2", "q3"), "q2")
}

func TestAlternateExchange(t *testing.T) {
	e := newEnv(t)
	v := e.v
	e.declareQueue("main", false)
	e.declareQueue("unrouted", false)
	e.declareExchange("ae", "fanout", false, nil)
	e.bind("unrouted", "ae", "", nil)
	e.declareExchange("x", "direct", false, amqpwire.Table{"alternate-exchange": "ae"})
	e.bind("main", "x", "k", nil)

	wantRouted(t, e.routedTo(msg("x", "k", "1"), "main", "unrouted"), "main")
	wantRouted(t, e.routedTo(msg("x", "other", "2"), "main", "unrouted"), "unrouted")

	// An exchange whose bindings matched (here: to an exchange that routes
	// nowhere) does not use its alternate exchange, as in RabbitMQ.
	e.declareExchange("dead", "direct", false, nil)
	if err := v.BindExchange("dead", "x", "to-dead", nil); err != nil {
		t.Fatal(err)
	}
	before := v.Unroutable()
	wantRouted(t, e.routedTo(msg("x", "to-dead", "3"), "main", "unrouted"))
	if v.Unroutable() != before+1 {
		t.Error("message lost in an exchange that routes nowhere not counted unroutable")
	}

	// Alternate-exchange chains that loop end.
	e.declareExchange("ae2", "direct", false, amqpwire.Table{"alternate-exchange": "loop"})
	e.declareExchange("loop", "direct", false, amqpwire.Table{"alternate-exchange": "ae2"})
	wantRouted(t, e.routedTo(msg("loop", "k", "4"), "main", "unrouted"))

	// A missing alternate exchange is ignored.
	e.declareExchange("x2", "direct", false, amqpwire.Table{"alternate-exchange": "missing"})
	if res := e.publish(msg("x2", "k", "5")); res.Routed != 0 {
		t.Errorf("routed %d", res.Routed)
	}
}

func TestSenderSelectedDistribution(t *testing.T) {
	e := newEnv(t)
	for _, q := range []string{"a", "b", "c"} {
		e.declareQueue(q, false)
	}
	m := msg("", "a", "cc")
	m.Properties.Headers = amqpwire.Table{"CC": []any{"b"}, "BCC": []any{"c"}, "keep": "me"}
	got := e.routedTo(m, "a", "b", "c")
	wantRouted(t, got, "a", "b", "c")
	// The copy delivered has no BCC header; the publisher's message is untouched.
	e.publish(m)
	d, _, _ := e.v.Get("a", true, 1)
	if _, ok := d.Message.Properties.Headers["BCC"]; ok {
		t.Error("BCC header delivered")
	}
	if d.Message.Properties.Headers["keep"] != "me" {
		t.Error("other headers lost")
	}
	if _, ok := m.Properties.Headers["BCC"]; !ok {
		t.Error("publisher's message modified")
	}
}
