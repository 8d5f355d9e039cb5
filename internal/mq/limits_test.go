package mq

import (
	"slices"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func TestDropHead(t *testing.T) {
	e := newEnv(t)
	e.declareQueueArgs("q", false, amqpwire.Table{"x-max-length": int32(3), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
	e.declareQueue("dlq", false)
	for _, b := range bodies("m", 5) {
		if res := e.publish(msg("", "q", b)); res.Routed != 1 || res.Rejected != 0 {
			t.Fatalf("publish %s: %+v", b, res)
		}
	}
	if got := e.drain("q"); !slices.Equal(got, []string{"m2", "m3", "m4"}) {
		t.Fatalf("queue kept %v", got)
	}
	var reasons []string
	for e.messages("dlq") > 0 {
		d := e.get("dlq")
		reasons = append(reasons, string(d.Message.Body)+":"+deaths(t, d.Message)[0]["reason"].(string))
		e.v.Ack("dlq", d.Tag)
	}
	if !slices.Equal(reasons, []string{"m0:maxlen", "m1:maxlen"}) {
		t.Fatalf("dead letters %v", reasons)
	}

	// Bytes: bodies of 4 bytes, limit 10 → two fit.
	e.declareQueueArgs("b", false, amqpwire.Table{"x-max-length-bytes": int64(10)})
	for _, body := range []string{"aaaa", "bbbb", "cccc"} {
		e.publish(msg("", "b", body))
	}
	if got := e.drain("b"); !slices.Equal(got, []string{"bbbb", "cccc"}) {
		t.Fatalf("byte-limited queue kept %v", got)
	}

	// Unacknowledged messages do not count.
	e.declareQueueArgs("u", false, amqpwire.Table{"x-max-length": int32(1)})
	e.publish(msg("", "u", "first"))
	d := e.get("u")
	e.publish(msg("", "u", "second"))
	// Requeued in front, it makes the queue too long: the head goes, as
	// in RabbitMQ's requeue.
	e.v.Requeue("u", d.Tag)
	if got := e.drain("u"); !slices.Equal(got, []string{"second"}) {
		t.Fatalf("got %v", got)
	}
}

func TestRejectPublish(t *testing.T) {
	e := newEnv(t)
	e.declareQueueArgs("q", false, amqpwire.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"})
	e.declareQueue("other", false)
	e.declareExchange("fan", "fanout", false, nil)
	e.bind("q", "fan", "", nil)
	e.bind("other", "fan", "", nil)
	for i, b := range bodies("m", 2) {
		if res := e.publish(msg("", "q", b)); res.Rejected != 0 {
			t.Fatalf("publish %d rejected", i)
		}
	}
	res := e.publish(msg("", "q", "m2"))
	if res.Routed != 1 || res.Rejected != 1 {
		t.Fatalf("publish to a full queue: %+v, want routed 1 rejected 1", res)
	}
	// Through a fanout: the other queue takes it, the full one refuses.
	res = e.publish(msg("fan", "", "f"))
	if res.Routed != 2 || res.Rejected != 1 {
		t.Fatalf("fanout publish: %+v", res)
	}
	if e.messages("other") != 1 {
		t.Fatal("other queue missed the fanout message")
	}
	d := e.get("q")
	if string(d.Message.Body) != "m0" {
		t.Fatalf("head %s", d.Message.Body)
	}
	// Unacknowledged messages do not count: there is room again.
	if res := e.publish(msg("", "q", "m3")); res.Rejected != 0 {
		t.Fatalf("publish after a get rejected: %+v", res)
	}
	e.v.Ack("q", d.Tag)
	if got := e.drain("q"); !slices.Equal(got, []string{"m1", "m3"}) {
		t.Fatalf("queue holds %v", got)
	}

	// Persistent message refused by a durable queue: nothing to wait for.
	e.declareQueueArgs("dq", true, amqpwire.Table{"x-max-length-bytes": int32(3), "x-overflow": "reject-publish"})
	if res := e.publish(persistent("", "dq", "toolong")); res.Rejected != 1 || res.Durable.Pending() {
		t.Fatalf("durable reject: %+v", res)
	}

	// reject-publish-dlx: refused and dead-lettered.
	e.declareQueueArgs("x", false, amqpwire.Table{
		"x-max-length": int32(1), "x-overflow": "reject-publish-dlx",
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "x.dlq",
	})
	e.declareQueue("x.dlq", false)
	e.publish(msg("", "x", "kept"))
	if res := e.publish(msg("", "x", "refused")); res.Rejected != 1 {
		t.Fatalf("reject-publish-dlx: %+v", res)
	}
	if got := e.drain("x"); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("x holds %v", got)
	}
	dl := e.get("x.dlq")
	if ds := deaths(t, dl.Message); string(dl.Message.Body) != "refused" || ds[0]["reason"] != "maxlen" || ds[0]["queue"] != "x" {
		t.Fatalf("dead letter %s %v", dl.Message.Body, ds)
	}
}

func TestQueueArgumentErrors(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		args amqpwire.Table
		text string
	}{
		{amqpwire.Table{"x-max-length": int32(-1)}, "invalid arg 'x-max-length' for queue 'q' in vhost '/': {value_negative,-1}"},
		{amqpwire.Table{"x-max-length": "10"}, `invalid arg 'x-max-length' for queue 'q' in vhost '/': "expected integer, got longstr"`},
		{amqpwire.Table{"x-expires": int32(0)}, "invalid arg 'x-expires' for queue 'q' in vhost '/': {value_zero,0}"},
		{amqpwire.Table{"x-message-ttl": int64(315_360_000_001)}, "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': {value_too_large,315360000001}"},
		{amqpwire.Table{"x-overflow": "drop-tail"}, "invalid arg 'x-overflow' for queue 'q' in vhost '/': invalid_overflow"},
		{amqpwire.Table{"x-max-priority": int32(256)}, "invalid arg 'x-max-priority' for queue 'q' in vhost '/': {max_value_exceeded,256}"},
		{amqpwire.Table{"x-single-active-consumer": "yes"}, "invalid arg 'x-single-active-consumer' for queue 'q' in vhost '/': {unacceptable_type,longstr}"},
		{amqpwire.Table{"x-dead-letter-routing-key": "k"}, "invalid arg 'x-dead-letter-routing-key' for queue 'q' in vhost '/': routing_key_but_no_dlx_defined"},
		{amqpwire.Table{"x-queue-type": "fifo"}, `invalid arg 'x-queue-type' for queue 'q' in vhost '/': "unsupported queue type 'fifo'"`},
		{amqpwire.Table{"x-delivery-limit": int32(5)}, "invalid arg 'x-delivery-limit' for queue 'q' in vhost '/' of queue type rabbit_classic_queue"},
		{amqpwire.Table{"x-consumer-timeout": int32(-5)}, "invalid arg 'x-consumer-timeout' for queue 'q' in vhost '/': {value_negative,-5}"},
	}
	for _, c := range cases {
		_, err := e.v.DeclareQueue(QueueDef{Name: "q", Args: c.args}, false)
		wantCode(t, err, amqpwire.CodePreconditionFailed, "PRECONDITION_FAILED - "+c.text)
	}
	// Valid ones pass, including arguments of no queue type.
	e.declareQueueArgs("ok", false, amqpwire.Table{"x-max-length": uint8(3), "x-overflow": "reject-publish",
		"x-max-priority": int32(255), "x-queue-mode": "lazy", "x-whatever": "ignored"})
}
