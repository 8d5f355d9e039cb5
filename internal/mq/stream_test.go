package mq

import (
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func TestStreamDeclareRefusals(t *testing.T) {
	e, _ := newStreamEnv(t)
	q := "queue 's' in vhost '/'"
	cases := []struct {
		name string
		def  QueueDef
		code uint16
		text string
	}{
		{"non-durable", QueueDef{Name: "s", Args: streamArgs(nil)}, 406,
			"PRECONDITION_FAILED - invalid property 'non-durable' for " + q},
		{"exclusive", QueueDef{Name: "s", Durable: true, Exclusive: true, Args: streamArgs(nil)}, 406,
			"PRECONDITION_FAILED - invalid property 'exclusive-owner' for " + q},
		{"auto-delete", QueueDef{Name: "s", Durable: true, AutoDelete: true, Args: streamArgs(nil)}, 406,
			"PRECONDITION_FAILED - invalid property 'auto-delete' for " + q},
		{"server-named", QueueDef{Durable: true, Args: streamArgs(nil)}, 406,
			"PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_stream_queue"},
		{"bad max-age", QueueDef{Name: "s", Durable: true, Args: streamArgs(amqpwire.Table{"x-max-age": "7days"})}, 406,
			"PRECONDITION_FAILED - invalid arg 'x-max-age' for " + q + ": invalid_max_age"},
		{"max-age not a string", QueueDef{Name: "s", Durable: true, Args: streamArgs(amqpwire.Table{"x-max-age": int64(7)})}, 406,
			"PRECONDITION_FAILED - invalid arg 'x-max-age' for " + q + ": {unacceptable_type,long}"},
		{"classic argument", QueueDef{Name: "s", Durable: true, Args: streamArgs(amqpwire.Table{"x-message-ttl": int64(5)})}, 406,
			"PRECONDITION_FAILED - invalid arg 'x-message-ttl' for " + q + " of queue type rabbit_stream_queue"},
		{"segment too large", QueueDef{Name: "s", Durable: true, Args: streamArgs(amqpwire.Table{"x-stream-max-segment-size-bytes": int64(3_000_000_001)})}, 406,
			"PRECONDITION_FAILED - Exceeded max value for x-stream-max-segment-size-bytes"},
		{"not a topic name", QueueDef{Name: "a b", Durable: true, Args: streamArgs(nil)}, 406, ""},
		{"internal topic", QueueDef{Name: "__consumer_offsets", Durable: true, Args: streamArgs(nil)}, 406, ""},
	}
	for _, c := range cases {
		_, err := e.v.DeclareQueue(c.def, false)
		if err == nil {
			t.Fatalf("%s: declared", c.name)
		}
		wantCode(t, err, c.code, c.text)
	}
	if len(e.v.Queues()) != 0 {
		t.Fatalf("queues after refused declares: %v", e.v.Queues())
	}
}

func TestStreamDeclareWithoutStreamStore(t *testing.T) {
	e := newEnv(t)
	_, err := e.v.DeclareQueue(QueueDef{Name: "s", Durable: true, Args: streamArgs(nil)}, false)
	wantCode(t, err, 406, "PRECONDITION_FAILED - cannot declare queue 's' in vhost '/': stream queues are not available on this node")
}

func TestStreamRetentionArgumentsBecomeTopicConfigs(t *testing.T) {
	e, fs := newStreamEnv(t)
	e.declareStream("plain", nil)
	e.declareStream("kept", amqpwire.Table{"x-max-age": "7D", "x-max-length-bytes": int64(1_000_000),
		"x-stream-max-segment-size-bytes": int64(100_000)})
	e.declareStream("hours", amqpwire.Table{"x-max-age": "2h"})
	want := map[string]map[string]string{
		"plain": {"retention.ms": "-1", "retention.bytes": "-1", "segment.bytes": "500000000", "cleanup.policy": "delete"},
		"kept":  {"retention.ms": "604800000", "retention.bytes": "1000000", "segment.bytes": "100000", "cleanup.policy": "delete"},
		"hours": {"retention.ms": "7200000", "retention.bytes": "-1", "segment.bytes": "500000000", "cleanup.policy": "delete"},
	}
	for name, w := range want {
		got := fs.config(name)
		for k, v := range w {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q (all: %v)", name, k, got[k], v, got)
			}
		}
	}
	// Redeclaring with other retention is inequivalent, as in RabbitMQ.
	_, err := e.v.DeclareQueue(QueueDef{Name: "hours", Durable: true, Args: streamArgs(amqpwire.Table{"x-max-age": "3h"})}, false)
	wantCode(t, err, 406, "")
	if len(fs.config("hours")) == 0 || fs.config("hours")["retention.ms"] != "7200000" {
		t.Fatal("a refused redeclare changed the topic")
	}
}

func TestStreamConsumeFromOffsets(t *testing.T) {
	e, _ := newStreamEnv(t)
	e.declareStream("s", nil)
	e.publishBodies("", "s", "m0", "m1", "m2", "m3", "m4")
	if n := e.messages("s"); n != 5 {
		t.Fatalf("declare-ok message count %d, want 5", n)
	}

	first := newStreamConsumer(-1)
	e.consumeStream("s", first, "first")
	first.expect(t, []string{"m0", "m1", "m2", "m3", "m4"}, 0)

	fromThree := newStreamConsumer(-1)
	e.consumeStream("s", fromThree, int64(3))
	fromThree.expect(t, []string{"m3", "m4"}, 3)

	last := newStreamConsumer(-1)
	e.consumeStream("s", last, "last") // each message is its own batch
	last.expect(t, []string{"m4"}, 4)

	beyond := newStreamConsumer(-1)
	e.consumeStream("s", beyond, int64(99)) // clamped to the end: like next

	next := newStreamConsumer(-1)
	e.consumeStream("s", next, nil) // the default is next
	e.publishBodies("", "s", "m5")
	for _, c := range []*streamConsumer{first, fromThree, last, beyond, next} {
		c.expect(t, []string{"m5"}, 5)
		c.expectNone(t)
	}
	// Messages are not consumed away: a new reader from first sees all.
	again := newStreamConsumer(-1)
	e.consumeStream("s", again, "first")
	again.expect(t, []string{"m0", "m1", "m2", "m3", "m4", "m5"}, 0)
}

func TestStreamConsumeFromTimestamp(t *testing.T) {
	clk := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	e, _ := newStreamEnv(t, func(c *Config) { c.clock = clk.Now })
	e.declareStream("s", nil)
	e.publishBodies("", "s", "old")
	clk.advance(2 * time.Hour)
	mark := clk.Now()
	e.publishBodies("", "s", "new0")
	clk.advance(time.Minute)
	e.publishBodies("", "s", "new1")

	byTime := newStreamConsumer(-1)
	e.consumeStream("s", byTime, mark) // an AMQP timestamp: whole seconds
	byTime.expect(t, []string{"new0", "new1"}, 1)

	byInterval := newStreamConsumer(-1)
	e.consumeStream("s", byInterval, "1h") // records of the last hour
	byInterval.expect(t, []string{"new0", "new1"}, 1)

	future := newStreamConsumer(-1)
	e.consumeStream("s", future, clk.Now().Add(time.Hour))
	e.publishBodies("", "s", "later")
	future.expect(t, []string{"later"}, 3)
}

func TestStreamPrefetchCreditAndAcks(t *testing.T) {
	e, _ := newStreamEnv(t)
	e.declareStream("s", nil)
	e.publishBodies("", "s", bodies("m", 5)...)
	c := newStreamConsumer(2)
	sub := e.consumeStream("s", c, "first")
	c.expect(t, []string{"m0", "m1"}, 0)
	// Acking returns no credit by itself (the front end counts it), and
	// removes nothing from the log.
	d := []QueueTag{}
	if err := e.v.Ack("s", d...); err != nil {
		t.Fatal(err)
	}
	c.addCredit(2)
	sub.Resume()
	c.expect(t, []string{"m2", "m3"}, 2)
	c.addCredit(10)
	sub.Resume()
	c.expect(t, []string{"m4"}, 4)
	if n := e.messages("s"); n != 5 {
		t.Fatalf("message count after consuming %d, want 5", n)
	}
	sub.Cancel()
	e.publishBodies("", "s", "after-cancel")
	barrier := newStreamConsumer(-1)
	e.consumeStream("s", barrier, int64(5))
	barrier.expect(t, []string{"after-cancel"}, 5)
	c.expectNone(t)
}

func TestStreamConsumeRefusals(t *testing.T) {
	e, _ := newStreamEnv(t)
	e.declareStream("s", nil)
	c := newStreamConsumer(-1)
	q := "queue 's' in vhost '/'"
	cases := []struct {
		spec ConsumeSpec
		code uint16
		text string
	}{
		{ConsumeSpec{Consumer: c}, 406, "PRECONDITION_FAILED - consumer prefetch count is not set for stream " + q},
		{ConsumeSpec{Consumer: c, NoAck: true}, 406, "PRECONDITION_FAILED - consumer prefetch count is not set for stream " + q},
		{ConsumeSpec{Consumer: c, NoAck: true, Prefetch: 10}, 540, "NOT_IMPLEMENTED - automatic acknowledgement not supported by stream " + q},
		{ConsumeSpec{Consumer: c, Prefetch: 10, GlobalPrefetch: 10}, 540, "NOT_IMPLEMENTED - " + q + " does not support global qos"},
		{ConsumeSpec{Consumer: c, Prefetch: 10, Args: amqpwire.Table{"x-stream-offset": "sometime"}}, 406,
			"PRECONDITION_FAILED - invalid arg 'x-stream-offset' for " + q + ": 'sometime'"},
		{ConsumeSpec{Consumer: c, Prefetch: 10, Args: amqpwire.Table{"x-stream-offset": true}}, 406, ""},
		{ConsumeSpec{Consumer: c, Prefetch: 10, Args: amqpwire.Table{"x-stream-offset": int64(-1)}}, 406, ""},
	}
	for _, cs := range cases {
		_, err := e.v.Consume("s", cs.spec)
		wantCode(t, err, cs.code, cs.text)
	}
	_, _, err := e.v.Get("s", false, 1)
	wantCode(t, err, 540, "NOT_IMPLEMENTED - basic.get not supported by stream queues "+q)
	_, err = e.v.PurgeQueue("s", 1)
	wantCode(t, err, 540, "NOT_IMPLEMENTED - queue.purge not supported by stream queues "+q)
}

func TestStreamDeleteRemovesTopicAndCancelsConsumers(t *testing.T) {
	e, fs := newStreamEnv(t)
	e.declareStream("s", nil)
	e.publishBodies("", "s", "a")
	cancelled := make(chan struct{})
	c := newStreamConsumer(-1)
	sub, err := e.v.Consume("s", ConsumeSpec{Tag: "t", Conn: 1, Consumer: c, Prefetch: 10,
		Args: amqpwire.Table{StreamOffsetHeader: "first"}, Cancelled: func() { close(cancelled) }})
	if err != nil {
		t.Fatal(err)
	}
	sub.Resume()
	c.expect(t, []string{"a"}, 0)
	if _, err := e.v.DeleteQueue("s", false, false, 1); err != nil {
		t.Fatal(err)
	}
	<-cancelled
	if fs.stream("s") != nil {
		t.Fatal("the topic outlived its stream queue")
	}
	// The name is free again, on a new, empty topic.
	e.declareStream("s", nil)
	if n := e.messages("s"); n != 0 {
		t.Fatalf("redeclared stream holds %d messages", n)
	}
}

func TestStreamTopicNamesPerVHost(t *testing.T) {
	for _, c := range []struct{ vhost, queue, topic string }{
		{"/", "orders", "orders"},
		{"prod", "orders", "prod.orders"},
		{"/prod", "orders", "_prod.orders"},
		{"a.b", "c", "a_b.c"},
	} {
		if got := StreamTopicName(c.vhost, c.queue); got != c.topic {
			t.Errorf("StreamTopicName(%q, %q) = %q, want %q", c.vhost, c.queue, got, c.topic)
		}
	}
	e, fs := newStreamEnv(t)
	for _, name := range []string{"a.b", "a_b"} {
		if _, err := e.r.AddVHost(name); err != nil {
			t.Fatal(err)
		}
	}
	v1, _ := e.r.VHost("a.b")
	v2, _ := e.r.VHost("a_b")
	if _, err := v1.DeclareQueue(QueueDef{Name: "c", Durable: true, Args: streamArgs(nil)}, false); err != nil {
		t.Fatal(err)
	}
	if fs.stream("a_b.c") == nil {
		t.Fatal("no topic a_b.c")
	}
	_, err := v2.DeclareQueue(QueueDef{Name: "c", Durable: true, Args: streamArgs(nil)}, false)
	wantCode(t, err, 406, "PRECONDITION_FAILED - cannot declare queue 'c' in vhost 'a_b': its topic 'a_b.c' belongs to queue 'c' in vhost 'a.b'")
}

func TestStreamSurvivesRestart(t *testing.T) {
	e, _ := newStreamEnv(t)
	e.declareStream("s", amqpwire.Table{"x-max-age": "1D"})
	m := persistent("", "s", "kept")
	m.Properties.MessageID = "id-1"
	waitDurable(t, e.publish(m))
	e.restart()
	if n := e.messages("s"); n != 1 {
		t.Fatalf("after restart: %d messages", n)
	}
	c := newStreamConsumer(-1)
	e.consumeStream("s", c, "first")
	d := c.next(t)
	if string(d.Message.Body) != "kept" || d.Message.Properties.MessageID != "id-1" || d.Message.Properties.DeliveryMode != 2 {
		t.Fatalf("after restart got %+v", d.Message)
	}
	// The definition kept its arguments.
	_, err := e.v.DeclareQueue(QueueDef{Name: "s", Durable: true, Args: streamArgs(nil)}, false)
	wantCode(t, err, 406, "")
}

func TestStreamRoutingAndDeadLettering(t *testing.T) {
	e, _ := newStreamEnv(t)
	e.declareStream("s", nil)
	e.declareExchange("fan", "fanout", true, nil)
	e.bind("s", "fan", "", nil)
	e.declareQueueArgs("dlq-source", true, amqpwire.Table{"x-dead-letter-exchange": "fan"})
	e.publish(msg("fan", "rk", "routed"))
	e.publish(msg("", "dlq-source", "rejected"))
	d := e.get("dlq-source")
	if err := e.v.Discard("dlq-source", d.Tag); err != nil {
		t.Fatal(err)
	}
	c := newStreamConsumer(-1)
	e.consumeStream("s", c, "first")
	got := c.next(t)
	if string(got.Message.Body) != "routed" || got.Message.Exchange != "fan" || got.Message.RoutingKey != "rk" {
		t.Fatalf("first: %q via %q/%q", got.Message.Body, got.Message.Exchange, got.Message.RoutingKey)
	}
	got = c.next(t)
	if string(got.Message.Body) != "rejected" {
		t.Fatalf("second: %q", got.Message.Body)
	}
	if _, ok := got.Message.Properties.Headers["x-death"].([]any); !ok {
		t.Fatalf("dead letter in a stream lost x-death: %v", got.Message.Properties.Headers)
	}
}

func TestStreamCloseStopsReaders(t *testing.T) {
	e, _ := newStreamEnv(t)
	e.declareStream("s", nil)
	for range 3 {
		e.consumeStream("s", newStreamConsumer(-1), nil) // parked at the end
	}
	e.consumeStream("s", newStreamConsumer(0), "first") // parked without credit
	done := make(chan error, 1)
	go func() { done <- e.r.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return: a stream reader is still running")
	}
	e.r = nil
}
