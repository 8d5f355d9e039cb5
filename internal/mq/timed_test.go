package mq

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// timeoutConsumer is a consumer that hears of timed-out deliveries.
type timeoutConsumer struct {
	*testConsumer
	mu       sync.Mutex
	timeouts []QueueTag
	timeout  time.Duration
}

func (c *timeoutConsumer) DeliveryTimedOut(tag QueueTag, timeout time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timeouts = append(c.timeouts, tag)
	c.timeout = timeout
}

func (c *timeoutConsumer) told() ([]QueueTag, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.timeouts), c.timeout
}

func (e *env) consumeTimed(queue string, c *timeoutConsumer) {
	e.t.Helper()
	sub, err := e.v.Consume(queue, ConsumeSpec{Tag: "timed", Conn: 1, Consumer: c})
	if err != nil {
		e.t.Fatal(err)
	}
	sub.Resume()
}

func TestConsumerTimeout(t *testing.T) {
	e, clk := newTimedEnv(t, func(c *Config) { c.ConsumerTimeout = time.Minute })
	e.declareQueueArgs("q", false, amqpwire.Table{"x-consumer-timeout": int32(5000)})
	c := &timeoutConsumer{testConsumer: newConsumer(-1)}
	plain := newConsumer(-1) // no hook: not watched, not disturbed
	e.consumeTimed("q", c)
	e.consume("q", plain, false)
	e.publish(msg("", "q", "a"))
	e.publish(msg("", "q", "b")) // to plain
	e.tick(clk, 2*time.Second)
	e.publish(msg("", "q", "c"))
	e.tick(clk, 3*time.Second) // "a" is now exactly 5 s old: not yet
	if tags, _ := c.told(); len(tags) != 0 {
		t.Fatalf("told early: %v", tags)
	}
	// Delivery times are taken from a coarse clock, rounded up: a
	// timeout may be reported up to coarseTick late, never early.
	e.tick(clk, coarseTick+time.Millisecond)
	tags, timeout := c.told()
	if first := c.deliveries()[0]; !slices.Equal(tags, []QueueTag{first.Tag}) || timeout != 5*time.Second {
		t.Fatalf("told %v with %v, want [%d] with 5s", tags, timeout, first.Tag)
	}
	// Each delivery is reported once; "c" times out 2 s later.
	e.tick(clk, time.Second)
	if tags, _ := c.told(); len(tags) != 1 {
		t.Fatalf("told again: %v", tags)
	}
	e.tick(clk, time.Second)
	if tags, _ := c.told(); len(tags) != 2 || tags[1] != c.deliveries()[1].Tag {
		t.Fatalf("second report %v", tags)
	}
	// The front end closes the channel: the deliveries are requeued, not
	// lost; an acknowledged delivery is never reported.
	ds := c.deliveries()
	e.v.Requeue("q", ds[0].Tag, ds[1].Tag)
	if e.messages("q")+len(plain.deliveries()) < 2 {
		t.Fatal("timed-out deliveries were not requeued")
	}

	// Without x-consumer-timeout the registry's default applies.
	e.declareQueue("d", false)
	c2 := &timeoutConsumer{testConsumer: newConsumer(-1)}
	e.consumeTimed("d", c2)
	e.publish(msg("", "d", "x"))
	e.publish(msg("", "d", "acked"))
	e.v.Ack("d", c2.deliveries()[1].Tag)
	e.tick(clk, time.Minute)
	if tags, _ := c2.told(); len(tags) != 0 {
		t.Fatal("told before the default timeout")
	}
	e.tick(clk, coarseTick+time.Millisecond)
	if tags, timeout := c2.told(); len(tags) != 1 || tags[0] != c2.deliveries()[0].Tag || timeout != time.Minute {
		t.Fatalf("default timeout: told %v with %v", tags, timeout)
	}
}

func TestQueueExpires(t *testing.T) {
	e, clk := newTimedEnv(t)
	e.declareQueueArgs("q", false, amqpwire.Table{"x-expires": int32(1000)})
	e.publish(msg("", "q", "m")) // publishing is not a use
	e.tick(clk, 600*time.Millisecond)
	if _, ok, _ := e.v.Get("q", false, 1); !ok { // basic.get is
		t.Fatal("get found nothing")
	}
	e.tick(clk, 900*time.Millisecond)
	e.declareQueueArgs("q", false, amqpwire.Table{"x-expires": int32(1000)}) // so is a redeclare
	e.tick(clk, 900*time.Millisecond)
	if e.messages("q") != 0 { // passive declare: also a use
		t.Fatal("unexpected messages")
	}
	c := newConsumer(-1)
	sub := e.consume("q", c, true)
	e.tick(clk, 10*time.Second) // a queue with consumers never expires
	e.messages("q")
	sub.Cancel()
	e.tick(clk, 999*time.Millisecond)
	if _, err := e.v.lookupQueue("q"); err != nil {
		t.Fatal("deleted before x-expires after the last consumer left")
	}
	e.tick(clk, time.Millisecond)
	if _, err := e.v.lookupQueue("q"); err == nil {
		t.Fatal("unused queue not deleted")
	}
	if c.cancelled.Load() != 0 {
		t.Fatal("cancelled consumer notified")
	}

	// Durable: deleted with its definition and files; the clock restarts
	// with the broker.
	e.declareQueueArgs("d", true, amqpwire.Table{"x-expires": int32(1000)})
	e.tick(clk, 900*time.Millisecond)
	e.restart()
	e.tick(clk, 900*time.Millisecond)
	q, err := e.v.lookupQueue("d")
	if err != nil {
		t.Fatal("expired counting from before the restart")
	}
	dir := q.store.Dir()
	e.tick(clk, 100*time.Millisecond)
	if _, err := e.v.lookupQueue("d"); err == nil {
		t.Fatal("durable queue not expired")
	}
	for _, k := range e.defs.keys() {
		if k == queueKey("/", "d") {
			t.Fatal("definition of the expired queue kept")
		}
	}
	e.restart()
	if _, err := e.v.lookupQueue("d"); err == nil {
		t.Fatalf("expired queue back after restart (dir %s)", dir)
	}
}

// A durable queue's TTLs and limits hold across a restart: enqueue times
// come from the log, counts and sizes from the recovered messages.
func TestTTLAndLimitsAfterRestart(t *testing.T) {
	e, clk := newTimedEnv(t)
	e.declareQueue("expired", true)
	e.declareQueueArgs("ttl", true, amqpwire.Table{"x-message-ttl": int32(60_000),
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "expired"})
	waitDurable(t, e.publish(persistent("", "ttl", "early")))
	e.tick(clk, 30*time.Second)
	waitDurable(t, e.publish(persistent("", "ttl", "late")))

	e.declareQueueArgs("full", true, amqpwire.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"})
	e.declareQueueArgs("bytes", true, amqpwire.Table{"x-max-length-bytes": int32(8)}) // drop-head
	for _, b := range []string{"f1", "f2"} {
		waitDurable(t, e.publish(persistent("", "full", b)))
	}
	for _, b := range []string{"aaaa", "bbbb"} {
		waitDurable(t, e.publish(persistent("", "bytes", b)))
	}
	// A queue without TTL holding a message with its own expiration.
	e.declareQueue("own", true)
	m := persistent("", "own", "own-ttl")
	m.Properties.Expiration = "45000"
	waitDurable(t, e.publish(m))
	waitDurable(t, e.publish(persistent("", "own", "forever")))

	e.restart()
	e.tick(clk, 29*time.Second) // 59 s after "early"
	if e.messages("ttl") != 2 {
		t.Fatalf("ttl holds %d after restart, want 2", e.messages("ttl"))
	}
	e.tick(clk, time.Second)
	if got := e.drain("expired"); !slices.Equal(got, []string{"early"}) {
		t.Fatalf("after 60 s dead letters %v", got)
	}
	if res := e.publish(persistent("", "full", "f3")); res.Rejected != 1 {
		t.Fatalf("full queue accepted after restart: %+v", res)
	}
	e.publish(persistent("", "bytes", "cc"))
	if got := e.drain("bytes"); !slices.Equal(got, []string{"bbbb", "cc"}) {
		t.Fatalf("byte limit after restart: %v", got)
	}
	e.tick(clk, 30*time.Second) // 60 s after "own-ttl" was published with 45 s
	if got := e.drain("own"); !slices.Equal(got, []string{"forever"}) {
		t.Fatalf("own expiration after restart: %v", got)
	}
	e.wantEmpty("ttl")
	if got := e.drain("expired"); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("late dead letters %v", got)
	}
}
