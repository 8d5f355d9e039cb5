package mq

import (
	"slices"
	"sync"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// recordingObserver is an ExchangeObserver that records what it is told
// and takes the messages it is given when take is set.
type recordingObserver struct {
	take bool

	mu       sync.Mutex
	bindings []string // "+key" or "-key", in order
	routed   []*Message
}

func (o *recordingObserver) BindingAdded(key string) {
	o.mu.Lock()
	o.bindings = append(o.bindings, "+"+key)
	o.mu.Unlock()
}

func (o *recordingObserver) BindingRemoved(key string) {
	o.mu.Lock()
	o.bindings = append(o.bindings, "-"+key)
	o.mu.Unlock()
}

func (o *recordingObserver) Route(m *Message) bool {
	o.mu.Lock()
	o.routed = append(o.routed, m)
	o.mu.Unlock()
	return o.take
}

func (o *recordingObserver) events() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.bindings)
}

func (o *recordingObserver) routedBodies() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, m := range o.routed {
		out = append(out, m.RoutingKey+"="+string(m.Body))
	}
	return out
}

func (e *env) observe(exchange string, o ExchangeObserver) {
	e.t.Helper()
	if err := e.v.ObserveExchange(exchange, o); err != nil {
		e.t.Fatalf("ObserveExchange(%s): %v", exchange, err)
	}
}

// TestObserverSeesEveryBindingChange: the observer learns the bindings
// already there, then every binding added or removed, however it goes
// (unbind, queue deletion, deletion of a destination exchange).
func TestObserverSeesEveryBindingChange(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("before", true)
	e.bind("before", "amq.topic", "orders.#", nil)
	o := &recordingObserver{}
	e.observe("amq.topic", o)
	if err := e.v.ObserveExchange("amq.topic", &recordingObserver{}); err == nil {
		t.Fatal("a second observer was installed")
	}

	e.declareQueue("q", false)
	e.bind("q", "amq.topic", "a.*", nil)
	e.bind("q", "amq.topic", "a.*", nil) // again: no change
	e.bind("q", "amq.direct", "not-observed", nil)
	e.declareExchange("x", "fanout", false, nil)
	if err := e.v.BindExchange("x", "amq.topic", "to.x", nil); err != nil {
		t.Fatal(err)
	}
	if err := e.v.UnbindQueue("before", "amq.topic", "orders.#", nil, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.v.DeleteQueue("q", false, false, 1); err != nil {
		t.Fatal(err)
	}
	if err := e.v.DeleteExchange("x", false); err != nil {
		t.Fatal(err)
	}
	want := []string{"+orders.#", "+a.*", "+to.x", "-orders.#", "-a.*", "-to.x"}
	if got := o.events(); !slices.Equal(got, want) {
		t.Fatalf("observer saw %q, want %q", got, want)
	}
	wantCode(t, e.v.ObserveExchange("nope", o), amqpwire.CodeNotFound, "")
	wantCode(t, e.v.ObserveExchange("", o), amqpwire.CodeAccessRefused, "")
}

// TestObserverTakesPartInRouting: a message the observer's subscribers
// take counts as routed (no basic.return, not unroutable); one they do
// not take and no queue gets is unroutable. The observer sees messages
// that reach its exchange through another exchange and as dead letters,
// never one it published itself, and never a BCC header.
func TestObserverTakesPartInRouting(t *testing.T) {
	e := newEnv(t)
	o := &recordingObserver{take: true}
	e.observe("amq.topic", o)

	if res := e.publish(msg("amq.topic", "only.outside", "1")); res.Routed != 1 {
		t.Fatalf("taken by the observer only: Routed %d, want 1", res.Routed)
	}
	e.declareQueue("q", false)
	e.bind("q", "amq.topic", "both", nil)
	if res := e.publish(msg("amq.topic", "both", "2")); res.Routed != 2 {
		t.Fatalf("a queue and the observer: Routed %d, want 2", res.Routed)
	}
	own := msg("amq.topic", "both", "3")
	own.Origin = o
	if res := e.publish(own); res.Routed != 1 {
		t.Fatalf("the observer's own message: Routed %d, want 1 (the queue)", res.Routed)
	}

	e.declareExchange("upstream", "direct", false, nil)
	if err := e.v.BindExchange("amq.topic", "upstream", "via", nil); err != nil {
		t.Fatal(err)
	}
	bcc := msg("upstream", "via", "4")
	bcc.Properties.Headers = amqpwire.Table{"BCC": []any{"secret"}, "kept": "yes"}
	e.publish(bcc)

	if _, err := e.v.DeclareQueue(QueueDef{Name: "dying", Args: amqpwire.Table{
		"x-dead-letter-exchange": "amq.topic", "x-dead-letter-routing-key": "dead",
	}}, false); err != nil {
		t.Fatal(err)
	}
	e.publish(msg("", "dying", "5"))
	d, _, err := e.v.Get("dying", false, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.v.Discard("dying", d.Tag); err != nil {
		t.Fatal(err)
	}

	want := []string{"only.outside=1", "both=2", "via=4", "dead=5"}
	if got := o.routedBodies(); !slices.Equal(got, want) {
		t.Fatalf("observer was given %q, want %q", got, want)
	}
	if h := o.routed[2].Properties.Headers; h["BCC"] != nil || h["kept"] != "yes" {
		t.Fatalf("observer saw headers %v: want kept, and no BCC", h)
	}

	o.take = false
	if res := e.publish(msg("amq.topic", "nobody", "6")); res.Routed != 0 {
		t.Fatalf("not taken: Routed %d, want 0", res.Routed)
	}
	if n := e.v.Unroutable(); n != 1 {
		t.Fatalf("unroutable %d, want 1 (only the message nobody took)", n)
	}
}
