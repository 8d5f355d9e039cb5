package mq

import (
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// fakeClock is the registry clock in tests of timed behaviour: time moves
// only when the test says, and the test then runs the due timers itself.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// newTimedEnv is an env whose registry runs on a fake clock, with no
// timer goroutine: timers run when the test calls tick.
func newTimedEnv(t *testing.T, tweak ...func(*Config)) (*env, *fakeClock) {
	clk := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	tweak = append([]func(*Config){func(c *Config) { c.clock, c.manualTimers = clk.Now, true }}, tweak...)
	return newEnv(t, tweak...), clk
}

// tick advances the fake clock and runs every timer due.
func (e *env) tick(clk *fakeClock, d time.Duration) {
	clk.advance(d)
	e.r.timers.fire(e.r.nowMs())
}

func (e *env) declareQueueArgs(name string, durable bool, args amqpwire.Table) {
	e.t.Helper()
	if _, err := e.v.DeclareQueue(QueueDef{Name: name, Durable: durable, Args: args}, false); err != nil {
		e.t.Fatalf("DeclareQueue(%s, %v): %v", name, args, err)
	}
}

// get takes one message with basic.get (acknowledgement mode).
func (e *env) get(queue string) *Delivery {
	e.t.Helper()
	d, ok, err := e.v.Get(queue, false, 1)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", queue, err)
	}
	if !ok {
		e.t.Fatalf("Get(%s): queue is empty", queue)
	}
	return d
}

func (e *env) wantEmpty(queue string) {
	e.t.Helper()
	if n := e.messages(queue); n != 0 {
		e.t.Fatalf("queue %s holds %d messages, want none", queue, n)
	}
}

// deaths returns a message's x-death entries.
func deaths(t *testing.T, m *Message) []map[string]any {
	t.Helper()
	arr, ok := m.Properties.Headers["x-death"].([]any)
	if !ok {
		t.Fatalf("no x-death array in headers %v", m.Properties.Headers)
	}
	out := make([]map[string]any, len(arr))
	for i, d := range arr {
		if out[i] = asTable(d); out[i] == nil {
			t.Fatalf("x-death[%d] is %T, not a table", i, d)
		}
	}
	return out
}

// roundTrip encodes a message's properties and decodes them, as a client
// receiving it would see them.
func roundTrip(t *testing.T, m *Message) amqpwire.Properties {
	t.Helper()
	raw, err := encodeProperties(m)
	if err != nil {
		t.Fatalf("encode properties: %v", err)
	}
	var p amqpwire.Properties
	if err := p.Decode(raw); err != nil {
		t.Fatalf("decode properties: %v", err)
	}
	return p
}
