package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/kvtest"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/users"
)

// testTimeout bounds every wait of a test.
const testTimeout = 10 * time.Second

// memDefs is an in-memory mq.DefinitionStore; kept across a restart it
// plays the durable metadata log.
type memDefs struct {
	mu sync.Mutex
	m  map[string][]byte
}

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

// newTestAuth returns a user store holding guest/guest, as a new node's,
// and permissions giving guest everything in the vhost "/".
func newTestAuth(t testing.TB) (*users.Store, *access.Store) {
	t.Helper()
	kv := kvtest.New() // users and permissions follow it, as the definition store
	userStore, err := users.Open(kv)
	if err != nil {
		t.Fatal(err)
	}
	accessStore, err := access.Open(kv)
	if err != nil {
		t.Fatal(err)
	}
	if err := users.Bootstrap(userStore, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := accessStore.GrantAll("guest", mq.DefaultVHost); err != nil {
		t.Fatal(err)
	}
	return userStore, accessStore
}

// testBroker is an AMQP server over a registry in a temporary directory,
// listening on 127.0.0.1.
type testBroker struct {
	t    testing.TB
	dir  string
	defs *memDefs
	// logDefs, when set, replaces defs: definitions fsynced to a log, as
	// the broker keeps them.
	logDefs mq.DefinitionStore
	cfg     Config
	logs    *testLogWriter

	reg  *mq.Registry
	srv  *Server
	addr string
	done chan error // Serve's result
}

// startBroker starts a broker; tweaks adjust the server's Config.
func startBroker(t testing.TB, tweaks ...func(*Config)) *testBroker {
	t.Helper()
	b := &testBroker{t: t, dir: t.TempDir(), defs: &memDefs{m: make(map[string][]byte)}, logs: &testLogWriter{t: t}}
	userStore, accessStore := newTestAuth(t)
	b.cfg = Config{Logger: slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Users: userStore, Access: accessStore}
	for _, tw := range tweaks {
		tw(&b.cfg)
	}
	b.start()
	t.Cleanup(func() {
		b.stop()
		b.logs.stop()
	})
	return b
}

func (b *testBroker) start() {
	b.t.Helper()
	var defs mq.DefinitionStore = b.defs
	if b.logDefs != nil {
		defs = b.logDefs
	}
	reg, err := mq.Open(mq.Config{DataDir: b.dir, Definitions: defs, Logger: b.cfg.Logger})
	if err != nil {
		b.t.Fatalf("open registry: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		reg.Close()
		b.t.Fatal(err)
	}
	b.reg, b.srv, b.addr, b.done = reg, NewServer(reg, b.cfg), ln.Addr().String(), make(chan error, 1)
	go func() { b.done <- b.srv.Serve(ln) }()
}

// stop shuts the server down and closes the registry, failing the test if
// either goes wrong. Idempotent.
func (b *testBroker) stop() {
	if b.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		b.t.Errorf("shutdown: %v", err)
	}
	if err := <-b.done; err != nil {
		b.t.Errorf("serve: %v", err)
	}
	if err := b.reg.Close(); err != nil {
		b.t.Errorf("close registry: %v", err)
	}
	b.srv = nil
	checkNoServerGoroutines(b.t)
}

// checkNoServerGoroutines fails the test if a goroutine of this package's
// server (connection reader or writer, confirm goroutine, alarm monitor)
// outlives Shutdown. A goroutine that has just signalled its WaitGroup may
// still be unwinding, hence the short grace period.
func checkNoServerGoroutines(t testing.TB) {
	t.Helper()
	owned := []string{"amqp.(*conn).", "amqp.(*confirmer).", "amqp.(*alarms).run", "netserve.(*Server[...]).ServeConn"}
	var leaked string
	deadline := time.Now().Add(time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = ""
		for _, g := range strings.Split(string(buf), "\n\n") {
			for _, frame := range owned {
				if strings.Contains(g, "internal/"+frame) {
					leaked = g
				}
			}
		}
		if leaked == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if leaked != "" {
		t.Errorf("goroutine outlived Shutdown:\n%s", leaked)
	}
}

// restart stops the broker and starts a new one on the same data.
func (b *testBroker) restart() {
	b.t.Helper()
	b.stop()
	b.start()
}

func (b *testBroker) url() string { return "amqp://guest:guest@" + b.addr + "/" }

// vhost returns the default vhost of the running registry.
func (b *testBroker) vhost() *mq.VHost {
	v, err := b.reg.VHost("/")
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// queueInfo reports a queue's state straight from the registry.
func (b *testBroker) queueInfo(name string) mq.QueueInfo {
	b.t.Helper()
	for _, q := range b.vhost().Queues() {
		if q.Name == name {
			return q
		}
	}
	b.t.Fatalf("no queue %q", name)
	return mq.QueueInfo{}
}

// dial connects with amqp091-go; the connection is closed at cleanup.
func (b *testBroker) dial() *amqp091.Connection {
	b.t.Helper()
	conn, err := amqp091.DialConfig(b.url(), amqp091.Config{Dial: amqp091.DefaultDial(testTimeout)})
	if err != nil {
		b.t.Fatalf("dial: %v", err)
	}
	b.t.Cleanup(func() { conn.Close() })
	return conn
}

// channel opens a channel on a new connection.
func (b *testBroker) channel() *amqp091.Channel {
	b.t.Helper()
	return openChannel(b.t, b.dial())
}

func openChannel(t testing.TB, conn *amqp091.Connection) *amqp091.Channel {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	return ch
}

func declareQueue(t testing.TB, ch *amqp091.Channel, name string, durable bool) amqp091.Queue {
	t.Helper()
	q, err := ch.QueueDeclare(name, durable, false, false, false, nil)
	if err != nil {
		t.Fatalf("declare queue %q: %v", name, err)
	}
	return q
}

// confirmedPublisher is a channel in confirm mode whose publishes wait for
// their confirms.
type confirmedPublisher struct {
	t  testing.TB
	ch *amqp091.Channel
}

func newConfirmedPublisher(t testing.TB, ch *amqp091.Channel) *confirmedPublisher {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("confirm.select: %v", err)
	}
	return &confirmedPublisher{t: t, ch: ch}
}

// publish sends one message and waits for its confirm; it reports whether
// it was an ack.
func (p *confirmedPublisher) publish(exchange, key string, msg amqp091.Publishing) bool {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, msg)
	if err != nil {
		p.t.Fatalf("publish: %v", err)
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		p.t.Fatalf("waiting for confirm: %v", err)
	}
	return ok
}

// consume starts a consumer and returns its deliveries.
func consume(t testing.TB, ch *amqp091.Channel, queue string, autoAck bool) <-chan amqp091.Delivery {
	t.Helper()
	d, err := ch.Consume(queue, "", autoAck, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume %q: %v", queue, err)
	}
	return d
}

// next waits for one delivery.
func next(t testing.TB, deliveries <-chan amqp091.Delivery) amqp091.Delivery {
	t.Helper()
	select {
	case d, ok := <-deliveries:
		if !ok {
			t.Fatal("delivery channel closed")
		}
		return d
	case <-time.After(testTimeout):
		t.Fatal("no delivery in time")
	}
	return amqp091.Delivery{}
}

// amqpError waits for the close notification of a channel or connection
// and returns its error.
func closeError(t testing.TB, notify chan *amqp091.Error) *amqp091.Error {
	t.Helper()
	select {
	case err := <-notify:
		if err == nil {
			t.Fatal("closed without an error")
		}
		return err
	case <-time.After(testTimeout):
		t.Fatal("not closed in time")
	}
	return nil
}

// wantCode checks that err is an AMQP error with the given reply code.
func wantCode(t testing.TB, err error, code int) *amqp091.Error {
	t.Helper()
	var ae *amqp091.Error
	if !errors.As(err, &ae) {
		t.Fatalf("got %v (%T), want an AMQP error %d", err, err, code)
	}
	if ae.Code != code {
		t.Fatalf("got error %d %q, want code %d", ae.Code, ae.Reason, code)
	}
	return ae
}

// waitFor polls cond until it holds, failing after testTimeout. Used only
// where the state lives in another process's view (a queue count after an
// asynchronous requeue).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testLogWriter forwards log lines to t.Log until stop is called.
type testLogWriter struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		line := p
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		w.t.Log(string(line))
	}
	return len(p), nil
}

func (w *testLogWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

func body(i int) []byte { return []byte(fmt.Sprintf("message %d", i)) }
