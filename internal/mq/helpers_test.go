package mq

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/queuestore"
)

// memDefs is an in-memory DefinitionStore. Shared between two registries
// opened one after the other it plays the durable metadata log.
type memDefs struct {
	mu sync.Mutex
	m  map[string][]byte
}

func newMemDefs() *memDefs { return &memDefs{m: make(map[string][]byte)} }

func (s *memDefs) Put(key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = slices.Clone(value)
	return nil
}

func (s *memDefs) Delete(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

func (s *memDefs) Load(fn func(key string, value []byte) error) error {
	s.mu.Lock()
	snap := maps.Clone(s.m)
	s.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(snap)) {
		if err := fn(k, snap[k]); err != nil {
			return err
		}
	}
	return nil
}

func (s *memDefs) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.m))
}

// env is a registry on a temp dir with an in-memory definition store.
type env struct {
	t    *testing.T
	dir  string
	defs *memDefs
	cfg  Config
	r    *Registry
	v    *VHost
}

func newEnv(t *testing.T, tweak ...func(*Config)) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), defs: newMemDefs()}
	e.cfg = Config{DataDir: e.dir, Definitions: e.defs}
	for _, f := range tweak {
		f(&e.cfg)
	}
	e.open()
	t.Cleanup(func() {
		if e.r != nil {
			e.r.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	r, err := Open(e.cfg)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.r = r
	e.v, err = r.VHost("/")
	if err != nil {
		e.t.Fatalf("VHost: %v", err)
	}
}

// restart closes the registry cleanly and opens a new one on the same
// directory and definitions.
func (e *env) restart() {
	e.t.Helper()
	if err := e.r.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.r = nil
	e.open()
}

// crash abandons the registry without closing its logs (no clean-shutdown
// markers, nothing beyond what was fsynced or written is promised) and opens
// a new one on the same directory.
func (e *env) crash() {
	e.t.Helper()
	e.r.closed.Store(true)
	e.r.timers.shutdown()
	e.r.syncer.Shutdown()
	e.r.stores.Abandon()
	e.r = nil
	e.open()
}

// local is q's store as the local implementation, for tests that look
// into it.
func (q *queue) local() *queuestore.Store { return q.store.(*queuestore.Store) }

func (e *env) declareQueue(name string, durable bool) {
	e.t.Helper()
	if _, err := e.v.DeclareQueue(QueueDef{Name: name, Durable: durable}, false); err != nil {
		e.t.Fatalf("DeclareQueue(%s): %v", name, err)
	}
}

func (e *env) declareExchange(name, typ string, durable bool, args amqpwire.Table) {
	e.t.Helper()
	if err := e.v.DeclareExchange(ExchangeDef{Name: name, Type: typ, Durable: durable, Args: args}, false); err != nil {
		e.t.Fatalf("DeclareExchange(%s): %v", name, err)
	}
}

func (e *env) bind(queue, exchange, key string, args amqpwire.Table) {
	e.t.Helper()
	if err := e.v.BindQueue(queue, exchange, key, args, 1); err != nil {
		e.t.Fatalf("BindQueue(%s, %s, %q): %v", queue, exchange, key, err)
	}
}

func msg(exchange, key, body string) *Message {
	return &Message{Exchange: exchange, RoutingKey: key, Body: []byte(body)}
}

func persistent(exchange, key, body string) *Message {
	m := msg(exchange, key, body)
	m.Properties.DeliveryMode = 2
	return m
}

func (e *env) publish(m *Message) PublishResult {
	e.t.Helper()
	res, err := e.v.Publish(m)
	if err != nil {
		e.t.Fatalf("Publish(%s, %q): %v", m.Exchange, m.RoutingKey, err)
	}
	return res
}

// drain takes every ready message with basic.get (no-ack) and returns the
// bodies.
func (e *env) drain(queue string) []string {
	e.t.Helper()
	var out []string
	for {
		d, ok, err := e.v.Get(queue, true, 1)
		if err != nil {
			e.t.Fatalf("Get(%s): %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, string(d.Message.Body))
	}
}

func (e *env) messages(queue string) int {
	e.t.Helper()
	info, err := e.v.DeclareQueue(QueueDef{Name: queue}, true)
	if err != nil {
		e.t.Fatalf("passive declare %s: %v", queue, err)
	}
	return info.Messages
}

// wantCode fails unless err is an *Error with this reply code and, if text
// is not empty, exactly this reply text.
func wantCode(t *testing.T, err error, code uint16, text string) {
	t.Helper()
	var ae *Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v, want AMQP error %d", err, code)
	}
	if ae.Code != code {
		t.Fatalf("code %d (%s), want %d", ae.Code, ae.Text, code)
	}
	if text != "" && ae.Text != text {
		t.Fatalf("text %q\nwant %q", ae.Text, text)
	}
}

// testConsumer accepts deliveries while it has credit (negative: always).
type testConsumer struct {
	mu        sync.Mutex
	credit    int
	got       []*Delivery
	cancelled atomic.Int32
}

func newConsumer(credit int) *testConsumer { return &testConsumer{credit: credit} }

func (c *testConsumer) TryDeliver(d *Delivery) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.credit == 0 {
		return false
	}
	if c.credit > 0 {
		c.credit--
	}
	c.got = append(c.got, d)
	return true
}

func (c *testConsumer) addCredit(n int) {
	c.mu.Lock()
	c.credit += n
	c.mu.Unlock()
}

func (c *testConsumer) deliveries() []*Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func (c *testConsumer) bodies() []string {
	var out []string
	for _, d := range c.deliveries() {
		out = append(out, string(d.Message.Body))
	}
	return out
}

func (e *env) consume(queue string, c *testConsumer, noAck bool) *Subscription {
	e.t.Helper()
	sub, err := e.v.Consume(queue, ConsumeSpec{Tag: fmt.Sprintf("ctag-%p", c), NoAck: noAck, Conn: 1, Consumer: c,
		Cancelled: func() { c.cancelled.Add(1) }})
	if err != nil {
		e.t.Fatalf("Consume(%s): %v", queue, err)
	}
	sub.Resume()
	return sub
}

func bodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// waitDurable waits for a publish's confirm.
func waitDurable(t *testing.T, res PublishResult) {
	t.Helper()
	if !res.Durable.Pending() {
		t.Fatal("PublishResult.Durable is nil for a persistent message in a durable queue")
	}
	select {
	case <-res.Durable.Done():
		err := res.Durable.Err()
		if err != nil {
			t.Fatalf("confirm: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("confirm did not arrive")
	}
}

// wait blocks until d is done and returns its error.
func (d Durability) wait() error {
	<-d.Done()
	return d.Err()
}
