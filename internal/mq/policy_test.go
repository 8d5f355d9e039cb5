package mq

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func (e *env) setPolicy(name, pattern, applyTo string, priority int, def string) {
	e.t.Helper()
	var d map[string]any
	if err := json.Unmarshal([]byte(def), &d); err != nil {
		e.t.Fatal(err)
	}
	if err := e.v.SetPolicy(Policy{Name: name, Pattern: pattern, ApplyTo: applyTo, Priority: priority, Definition: d}); err != nil {
		e.t.Fatalf("SetPolicy(%s): %v", name, err)
	}
}

func (e *env) opts(queue string) queueOptions {
	e.t.Helper()
	q, err := e.v.lookupQueue(queue)
	if err != nil {
		e.t.Fatal(err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.opts
}

func TestPolicyValidation(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		p    Policy
		want string
	}{
		{Policy{Name: "p", Pattern: ".*", Definition: map[string]any{"max-priority": 5.0}},
			`not recognised policy settings: "max-priority" (known settings: alternate-exchange, consumer-timeout,`},
		{Policy{Name: "p", Pattern: ".*", Definition: map[string]any{"message-ttl": -1.0}},
			"message-ttl must be an integer from 0 to 315360000000 (milliseconds), got -1"},
		{Policy{Name: "p", Pattern: ".*", Definition: map[string]any{"message-ttl": "abc"}},
			`message-ttl must be an integer from 0 to 315360000000 (milliseconds), got "abc"`},
		{Policy{Name: "p", Pattern: ".*", Definition: map[string]any{"max-length": 1.5}},
			"max-length must be a non-negative integer (messages), got 1.5"},
		{Policy{Name: "p", Pattern: ".*", Definition: map[string]any{"delivery-limit": -2.0}},
			"delivery-limit must be an integer of -1 or more (deliveries, -1 for no limit), got -2"},
		{Policy{Name: "p", Pattern: ".*", Definition: map[string]any{"overflow": "nope"}},
			`overflow must be one of "drop-head", "reject-publish", "reject-publish-dlx", got "nope"`},
		{Policy{Name: "p", Pattern: ".*", Definition: map[string]any{"dead-letter-exchange": 5.0}},
			"dead-letter-exchange must be a string (an exchange name), got 5"},
		{Policy{Name: "p", Pattern: ".*", Definition: map[string]any{"max-age": "7 days"}},
			`max-age must be a positive integer and a unit, one of Y, M, D, h, m, s (such as "7D"), got "7 days"`},
		{Policy{Name: "p", Pattern: ".*", ApplyTo: "nothing", Definition: map[string]any{"max-length": 1.0}},
			`apply-to must be one of "queues", "classic_queues", "quorum_queues", "streams", "exchanges", "all", got "nothing"`},
		{Policy{Name: "p", Pattern: "(", Definition: map[string]any{"max-length": 1.0}},
			`pattern "(" is not a valid regular expression: error parsing regexp: missing closing ): ` + "`(`"},
		{Policy{Name: "p", Pattern: ".*", Definition: map[string]any{"dead-letter-routing-key": "k"}},
			"dead-letter-routing-key requires dead-letter-exchange"},
		{Policy{Name: "p", Pattern: ".*"}, `the policy definition is empty: give at least one setting, such as {"max-length": 1000}`},
		// Stored as JSON text, these would change at a restart.
		{Policy{Name: "p\xff", Pattern: ".*", Definition: map[string]any{"max-length": 1.0}},
			`policy name must be valid UTF-8, got "p\xff"`},
		{Policy{Name: "p", Pattern: "q\xff", Definition: map[string]any{"max-length": 1.0}},
			`pattern must be valid UTF-8, got "q\xff"`},
		{Policy{Name: "p", Pattern: ".*", Definition: map[string]any{"dead-letter-exchange": "x\xff"}},
			`dead-letter-exchange must be a string (an exchange name), got "x\xff"`},
	}
	for _, c := range cases {
		err := e.v.SetPolicy(c.p)
		var pe *PolicyError
		if !errors.As(err, &pe) || !strings.Contains(pe.Reason, c.want) {
			t.Errorf("SetPolicy(%v) = %v, want a PolicyError with %q", c.p.Definition, err, c.want)
		}
	}
	if len(e.v.Policies()) != 0 {
		t.Fatalf("invalid policies were stored: %v", e.v.Policies())
	}
}

func TestPolicyPrecedence(t *testing.T) {
	e := newEnv(t)
	e.declareQueueArgs("low-arg", false, amqpwire.Table{
		"x-max-length": int32(5), "x-message-ttl": int32(1000), "x-dead-letter-exchange": "arg-dlx", "x-overflow": "reject-publish",
	})
	e.declareQueueArgs("high-arg", false, amqpwire.Table{"x-max-length": int32(500), "x-expires": int32(900_000)})
	e.declareQueue("plain", false)
	e.setPolicy("p", ".*", "queues", 0,
		`{"max-length":50,"message-ttl":60000,"expires":600000,"dead-letter-exchange":"pol-dlx","dead-letter-routing-key":"rk","overflow":"drop-head"}`)

	low := e.opts("low-arg")
	if low.maxLength != 5 || low.messageTTL != 1000 || low.dlx != "arg-dlx" || low.overflow != rejectPublish {
		t.Errorf("low-arg: max-length %d ttl %d dlx %q overflow %d; want the arguments (5, 1000, arg-dlx, reject-publish)",
			low.maxLength, low.messageTTL, low.dlx, low.overflow)
	}
	if !low.hasDLRK || low.dlrk != "rk" {
		t.Errorf("low-arg: dead-letter-routing-key %q (%v), want the policy's rk", low.dlrk, low.hasDLRK)
	}
	high := e.opts("high-arg")
	if high.maxLength != 50 || high.expires != 600_000 {
		t.Errorf("high-arg: max-length %d expires %d; want the policy's lower 50 and 600000", high.maxLength, high.expires)
	}
	plain := e.opts("plain")
	if plain.maxLength != 50 || plain.messageTTL != 60000 || plain.dlx != "pol-dlx" || plain.overflow != dropHead {
		t.Errorf("plain: got %+v, want the policy's settings", plain)
	}
	d, err := e.v.QueueDetail("plain")
	if err != nil || d.Policy != "p" || d.PolicyDefinition["max-length"] != int64(50) {
		t.Errorf("QueueDetail(plain) = %+v, %v", d, err)
	}
}

func TestPolicyPriorityAndApplyTo(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("orders.a", false)
	e.declareQueueArgs("orders.q", true, amqpwire.Table{"x-queue-type": "quorum"})
	e.declareExchange("orders.x", "direct", false, nil)
	e.setPolicy("all-orders", "^orders\\.", "queues", 1, `{"max-length":10}`)
	e.setPolicy("orders-strong", "^orders\\.", "queues", 5, `{"max-length":3}`)
	e.setPolicy("quorum-only", "^orders\\.", "quorum_queues", 9, `{"delivery-limit":2}`)
	e.setPolicy("ae", "^orders\\.", "exchanges", 100, `{"alternate-exchange":"amq.fanout"}`)

	if got := e.opts("orders.a").maxLength; got != 3 {
		t.Errorf("orders.a max-length %d, want 3 from the priority-5 policy", got)
	}
	q := e.opts("orders.q")
	if q.maxLength != -1 || q.deliveryLimit != 2 {
		t.Errorf("orders.q: max-length %d delivery-limit %d; want only quorum-only's (none, 2)", q.maxLength, q.deliveryLimit)
	}
	if p, ok := e.v.ExchangePolicy("orders.x"); !ok || p.Name != "ae" {
		t.Errorf("ExchangePolicy(orders.x) = %v %v, want ae", p, ok)
	}
	e.v.mu.RLock()
	ae := e.v.exchanges["orders.x"].alternate
	e.v.mu.RUnlock()
	if ae != "amq.fanout" {
		t.Errorf("orders.x alternate exchange %q, want amq.fanout from the policy", ae)
	}

	// Clearing the winner lets the next one apply.
	if err := e.v.DeletePolicy("orders-strong"); err != nil {
		t.Fatal(err)
	}
	if got := e.opts("orders.a").maxLength; got != 10 {
		t.Errorf("after clearing orders-strong: max-length %d, want 10", got)
	}
	if err := e.v.DeletePolicy("orders-strong"); err == nil {
		t.Error("deleting a missing policy succeeded")
	} else {
		wantCode(t, err, amqpwire.CodeNotFound, "NOT_FOUND - no policy 'orders-strong' in vhost '/'")
	}
}

func TestPolicyAppliesToExistingQueue(t *testing.T) {
	e, clk := newTimedEnv(t)
	e.declareQueue("dead", false)
	e.declareQueue("work", false)
	for i := range 5 {
		e.publish(msg("", "work", string(rune('a'+i))))
	}
	// A lower length limit drops from the head at once, dead-lettering.
	e.setPolicy("limit", "^work$", "queues", 0, `{"max-length":2,"dead-letter-exchange":"","dead-letter-routing-key":"dead"}`)
	if got := e.drain("dead"); strings.Join(got, "") != "abc" {
		t.Fatalf("dead-lettered %v, want a b c", got)
	}
	if n := e.messages("work"); n != 2 {
		t.Fatalf("work holds %d messages, want 2", n)
	}
	e.drain("work")

	// A TTL set afterwards applies to messages published afterwards.
	e.setPolicy("limit", "^work$", "queues", 0, `{"message-ttl":100,"dead-letter-exchange":"","dead-letter-routing-key":"dead"}`)
	e.publish(msg("", "work", "x"))
	e.tick(clk, 150*time.Millisecond)
	e.wantEmpty("work")
	got := e.get("dead")
	if d := deaths(t, got.Message); d[0]["reason"] != "expired" || d[0]["queue"] != "work" {
		t.Fatalf("x-death %v, want expired from work", d)
	}

	// Cleared: no TTL any more.
	if err := e.v.DeletePolicy("limit"); err != nil {
		t.Fatal(err)
	}
	e.publish(msg("", "work", "y"))
	e.tick(clk, time.Second)
	if n := e.messages("work"); n != 1 {
		t.Fatalf("work holds %d messages after the policy was cleared, want 1", n)
	}
}

func TestPolicyPersistsAcrossRestart(t *testing.T) {
	e, clk := newTimedEnv(t)
	e.declareQueue("dead", true)
	e.declareQueue("work", true)
	e.setPolicy("ttl", "^work$", "queues", 7, `{"message-ttl":100,"dead-letter-exchange":"","dead-letter-routing-key":"dead"}`)
	e.restart()
	ps := e.v.Policies()
	if len(ps) != 1 || ps[0].Name != "ttl" || ps[0].Priority != 7 || ps[0].ApplyTo != "queues" || ps[0].Definition["message-ttl"] != int64(100) {
		t.Fatalf("policies after restart: %+v", ps)
	}
	waitDurable(t, e.publish(persistent("", "work", "m")))
	e.tick(clk, 150*time.Millisecond)
	e.wantEmpty("work")
	if d := deaths(t, e.get("dead").Message); d[0]["reason"] != "expired" {
		t.Fatalf("x-death %v", d)
	}

	// Deleted policies stay deleted; a deleted vhost takes its policies.
	if err := e.v.DeletePolicy("ttl"); err != nil {
		t.Fatal(err)
	}
	v2, err := e.r.AddVHost("v2")
	if err != nil {
		t.Fatal(err)
	}
	if err := v2.SetPolicy(Policy{Name: "x", Pattern: ".", Definition: map[string]any{"max-length": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := e.r.DeleteVHost("v2"); err != nil {
		t.Fatal(err)
	}
	e.restart()
	if ps := e.v.Policies(); len(ps) != 0 {
		t.Fatalf("policies after delete and restart: %+v", ps)
	}
	for _, k := range e.defs.keys() {
		if strings.HasPrefix(k, policyKeyPrefix) {
			t.Fatalf("policy key %q left in the store", k)
		}
	}
}
