package mq

import (
	"slices"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// The TTL + DLX retry ladder: a work queue dead-letters rejected messages
// to a retry queue that nobody consumes; its TTL sends them back to the
// work exchange. The consumer reads the attempt count from x-death and,
// after the third failure, parks the message in a final queue.
func TestRetryLadder(t *testing.T) {
	e, clk := newTimedEnv(t)
	e.declareExchange("work", "direct", true, nil)
	e.declareExchange("retry", "direct", true, nil)
	e.declareQueueArgs("jobs", true, amqpwire.Table{"x-dead-letter-exchange": "retry"})
	e.declareQueueArgs("jobs.retry", true, amqpwire.Table{"x-message-ttl": int32(5000), "x-dead-letter-exchange": "work"})
	e.declareQueue("jobs.parked", true)
	e.bind("jobs", "work", "job", nil)
	e.bind("jobs.retry", "retry", "job", nil)

	m := persistent("work", "job", "resize image 7")
	m.Properties.ContentType = "application/json"
	m.Properties.Headers = amqpwire.Table{"tenant": "acme"}
	waitDurable(t, e.publish(m))

	nacks := 0
	for {
		d := e.get("jobs")
		attempts := DeathCount(d.Message, "jobs", "rejected")
		if attempts != int64(nacks) {
			t.Fatalf("delivery %d shows %d earlier rejections", nacks+1, attempts)
		}
		if attempts == 3 {
			// Give up: park it with its headers, as applications do.
			parked := *d.Message
			parked.Exchange, parked.RoutingKey, parked.RawProperties = "", "jobs.parked", nil
			e.publish(&parked)
			e.v.Ack("jobs", d.Tag)
			break
		}
		e.v.Discard("jobs", d.Tag)
		nacks++
		e.wantEmpty("jobs")
		if e.messages("jobs.retry") != 1 {
			t.Fatalf("after nack %d the retry queue holds %d", nacks, e.messages("jobs.retry"))
		}
		e.tick(clk, 4999*time.Millisecond)
		if e.messages("jobs.retry") != 1 {
			t.Fatal("retry queue let the message go before its TTL")
		}
		e.tick(clk, time.Millisecond)
		e.wantEmpty("jobs.retry")
	}

	d := e.get("jobs.parked")
	p := roundTrip(t, d.Message)
	if string(d.Message.Body) != "resize image 7" || p.ContentType != "application/json" || p.DeliveryMode != 2 ||
		p.Headers["tenant"] != "acme" {
		t.Fatalf("parked message lost body or properties: %q %+v", d.Message.Body, p)
	}
	ds := deaths(t, &Message{Properties: p})
	if len(ds) != 2 {
		t.Fatalf("x-death has %d entries, want 2: %v", len(ds), ds)
	}
	// Most recent first: the retry queue's expiry, then the rejection.
	want := []struct {
		queue, reason, exchange, key string
	}{
		{"jobs.retry", "expired", "retry", "job"},
		{"jobs", "rejected", "work", "job"},
	}
	for i, w := range want {
		got := ds[i]
		if got["queue"] != w.queue || got["reason"] != w.reason || got["count"] != int64(3) ||
			got["exchange"] != w.exchange || !slices.Equal(got["routing-keys"].([]any), []any{w.key}) {
			t.Errorf("x-death[%d] = %v, want %s/%s count 3 via %s", i, got, w.queue, w.reason, w.exchange)
		}
		if ts, ok := got["time"].(time.Time); !ok || ts.IsZero() {
			t.Errorf("x-death[%d] time = %v", i, got["time"])
		}
	}
	h := p.Headers
	if h["x-first-death-queue"] != "jobs" || h["x-first-death-reason"] != "rejected" || h["x-first-death-exchange"] != "work" ||
		h["x-last-death-queue"] != "jobs.retry" || h["x-last-death-reason"] != "expired" || h["x-last-death-exchange"] != "retry" {
		t.Errorf("first/last death headers: %v", h)
	}
}

func TestDeadLetterRoutingKeyExpirationAndCC(t *testing.T) {
	e, clk := newTimedEnv(t)
	e.declareExchange("dlx", "direct", false, nil)
	e.declareQueueArgs("src", false, amqpwire.Table{
		"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "dead",
	})
	e.declareQueue("dead", false)
	e.declareQueue("cc-copy", false)
	e.bind("dead", "dlx", "dead", nil)
	e.bind("cc-copy", "dlx", "other", nil) // must not get the copy: CC is dropped with a new key

	m := msg("", "src", "short-lived")
	m.Properties.Expiration = "1500"
	m.Properties.Headers = amqpwire.Table{"CC": []any{"other"}}
	e.publish(m)
	e.tick(clk, 1499*time.Millisecond)
	if e.messages("src") != 1 {
		t.Fatal("expired early")
	}
	e.tick(clk, time.Millisecond)
	e.wantEmpty("src")
	e.wantEmpty("cc-copy")
	d := e.get("dead")
	if d.Message.Exchange != "dlx" || d.Message.RoutingKey != "dead" {
		t.Errorf("dead letter published to %q/%q", d.Message.Exchange, d.Message.RoutingKey)
	}
	p := roundTrip(t, d.Message)
	if p.Expiration != "" || p.Present&amqpwire.FlagExpiration != 0 {
		t.Errorf("expiration kept: %q", p.Expiration)
	}
	if _, ok := p.Headers["CC"]; ok {
		t.Error("CC header kept although the routing key was replaced")
	}
	ds := deaths(t, d.Message)
	if ds[0]["original-expiration"] != "1500" || ds[0]["reason"] != "expired" ||
		!slices.Equal(ds[0]["routing-keys"].([]any), []any{"src", "other"}) {
		t.Errorf("x-death %v", ds[0])
	}
}

func TestExpiredMessagesNeverReachConsumers(t *testing.T) {
	e, clk := newTimedEnv(t)
	e.declareQueueArgs("q", false, amqpwire.Table{"x-message-ttl": int32(1000), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
	e.declareQueue("dlq", false)
	c := newConsumer(0) // no credit yet
	sub := e.consume("q", c, false)
	e.publish(msg("", "q", "old"))
	clk.advance(600 * time.Millisecond) // no timers run: expiry must also hold at dispatch
	e.publish(msg("", "q", "young"))
	clk.advance(600 * time.Millisecond)
	c.addCredit(10)
	sub.Resume()
	if got := c.bodies(); !slices.Equal(got, []string{"young"}) {
		t.Fatalf("consumer got %v, want only the unexpired message", got)
	}
	if got := e.drain("dlq"); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("dead-letter queue holds %v", got)
	}
	// basic.get skips expired messages too.
	e.declareQueueArgs("g", false, amqpwire.Table{"x-message-ttl": int32(10)})
	e.publish(msg("", "g", "a"))
	clk.advance(20 * time.Millisecond)
	e.publish(msg("", "g", "b"))
	if got := e.drain("g"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("get returned %v", got)
	}
	// TTL 0: delivered if a consumer takes it at once, dropped otherwise.
	e.declareQueueArgs("zero", false, amqpwire.Table{"x-message-ttl": int32(0)})
	e.publish(msg("", "zero", "nobody"))
	e.wantEmpty("zero")
	z := newConsumer(-1)
	e.consume("zero", z, true)
	e.publish(msg("", "zero", "taken"))
	if got := z.bodies(); !slices.Equal(got, []string{"taken"}) {
		t.Fatalf("TTL 0 consumer got %v", got)
	}
}

func TestPerMessageTTLLowerOfTheTwo(t *testing.T) {
	e, clk := newTimedEnv(t)
	e.declareQueueArgs("q", false, amqpwire.Table{"x-message-ttl": int32(1000)})
	long := msg("", "q", "long")
	long.Properties.Expiration = "60000" // the queue's 1 s wins
	short := msg("", "q", "short")
	short.Properties.Expiration = "100"
	e.publish(short)
	e.publish(long)
	e.tick(clk, 100*time.Millisecond)
	if e.messages("q") != 1 {
		t.Fatalf("after 100 ms %d messages, want 1", e.messages("q"))
	}
	e.tick(clk, 900*time.Millisecond)
	e.wantEmpty("q")

	// Only heads expire: a short TTL behind a long one waits for its turn
	// (RabbitMQ), but never reaches a consumer.
	e.declareQueue("fifo", false)
	a := msg("", "fifo", "a")
	a.Properties.Expiration = "5000"
	b := msg("", "fifo", "b")
	b.Properties.Expiration = "10"
	e.publish(a)
	e.publish(b)
	e.tick(clk, time.Second)
	if e.messages("fifo") != 2 {
		t.Fatalf("fifo holds %d", e.messages("fifo"))
	}
	if got := e.drain("fifo"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("drain got %v, want the expired b skipped", got)
	}

	// A requeued message keeps its expiry.
	e.declareQueueArgs("rq", false, amqpwire.Table{"x-message-ttl": int32(1000)})
	e.publish(msg("", "rq", "x"))
	d := e.get("rq")
	e.tick(clk, 2*time.Second)
	e.v.Requeue("rq", d.Tag)
	e.tick(clk, 0)
	e.wantEmpty("rq")
}

func TestDeadLetterCycles(t *testing.T) {
	e, clk := newTimedEnv(t)
	// Expiring back into itself is a cycle without rejection: dropped.
	e.declareQueueArgs("loop", false, amqpwire.Table{
		"x-message-ttl": int32(100), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "loop",
	})
	e.publish(msg("", "loop", "m"))
	e.tick(clk, 100*time.Millisecond)
	e.wantEmpty("loop")

	// Two queues expiring into each other: dropped when it comes back.
	e.declareQueueArgs("a", false, amqpwire.Table{"x-message-ttl": int32(100), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "b"})
	e.declareQueueArgs("b", false, amqpwire.Table{"x-message-ttl": int32(100), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "a"})
	e.publish(msg("", "a", "m"))
	e.tick(clk, 100*time.Millisecond)
	if e.messages("b") != 1 {
		t.Fatal("a did not dead-letter to b")
	}
	e.tick(clk, 100*time.Millisecond)
	e.wantEmpty("a")
	e.wantEmpty("b")

	// A rejection in the cycle keeps it going: each pass counts.
	e.declareQueueArgs("r", false, amqpwire.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "r"})
	e.publish(msg("", "r", "m"))
	for pass := 1; pass <= 3; pass++ {
		d := e.get("r")
		e.v.Discard("r", d.Tag)
		d = e.get("r")
		if n := DeathCount(d.Message, "r", "rejected"); n != int64(pass) {
			t.Fatalf("pass %d: count %d", pass, n)
		}
		e.v.Requeue("r", d.Tag)
	}

	// A dead-letter exchange that does not exist drops the message.
	e.declareQueueArgs("lost", false, amqpwire.Table{"x-dead-letter-exchange": "nowhere"})
	e.publish(msg("", "lost", "m"))
	d := e.get("lost")
	e.v.Discard("lost", d.Tag)
	e.wantEmpty("lost")
}

func TestInvalidExpirationProperty(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	for exp, text := range map[string]string{
		"abc":          "PRECONDITION_FAILED - invalid expiration 'abc': no_integer",
		"-5":           "PRECONDITION_FAILED - invalid expiration '-5': {value_negative,-5}",
		"12ab":         `PRECONDITION_FAILED - invalid expiration '12ab': {leftover_string,"ab"}`,
		"315360000001": "PRECONDITION_FAILED - invalid expiration '315360000001': {value_too_large,315360000001}",
	} {
		m := msg("", "q", "x")
		m.Properties.Expiration = exp
		_, err := e.v.Publish(m)
		wantCode(t, err, amqpwire.CodePreconditionFailed, text)
	}
	e.wantEmpty("q")
}
