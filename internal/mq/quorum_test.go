package mq

import (
	"slices"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

var quorum = amqpwire.Table{"x-queue-type": "quorum"}

func withArgs(base amqpwire.Table, kv ...any) amqpwire.Table {
	t := amqpwire.Table{}
	for k, v := range base {
		t[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		t[kv[i].(string)] = kv[i+1]
	}
	return t
}

func TestQuorumDeclareRules(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		def  QueueDef
		text string
	}{
		{QueueDef{Name: "q", Durable: false, Args: quorum}, "invalid property 'non-durable' for queue 'q' in vhost '/'"},
		{QueueDef{Name: "q", Durable: true, Exclusive: true, Args: quorum}, "invalid property 'exclusive-owner' for queue 'q' in vhost '/'"},
		{QueueDef{Name: "q", Durable: true, AutoDelete: true, Args: quorum}, "invalid property 'auto-delete' for queue 'q' in vhost '/'"},
		{QueueDef{Name: "", Durable: true, Args: quorum}, "Cannot declare a server-named queue for type rabbit_quorum_queue"},
		{QueueDef{Name: "q", Durable: true, Args: withArgs(quorum, "x-max-priority", int32(5))},
			"invalid arg 'x-max-priority' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"},
		{QueueDef{Name: "q", Durable: true, Args: withArgs(quorum, "x-queue-mode", "lazy")},
			"invalid arg 'x-queue-mode' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"},
		{QueueDef{Name: "q", Durable: true, Args: withArgs(quorum, "x-delivery-limit", "many")},
			`invalid arg 'x-delivery-limit' for queue 'q' in vhost '/': "expected integer, got longstr"`},
	}
	for _, c := range cases {
		_, err := e.v.DeclareQueue(c.def, false)
		wantCode(t, err, amqpwire.CodePreconditionFailed, "PRECONDITION_FAILED - "+c.text)
	}
	e.declareQueueArgs("q", true, withArgs(quorum, "x-delivery-limit", int32(3), "x-overflow", "drop-head",
		"x-single-active-consumer", true, "x-dead-letter-strategy", "at-least-once"))
	// Redeclaration compares the quorum arguments, x-queue-type included.
	_, err := e.v.DeclareQueue(QueueDef{Name: "q", Durable: true, Args: withArgs(quorum, "x-delivery-limit", int32(4),
		"x-overflow", "drop-head", "x-single-active-consumer", true, "x-dead-letter-strategy", "at-least-once")}, false)
	wantCode(t, err, amqpwire.CodePreconditionFailed, "PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'q' in vhost '/': "+
		"received the value '4' of type 'signedint' but current is the value '3' of type 'signedint'")
	_, err = e.v.DeclareQueue(QueueDef{Name: "q", Durable: true}, false)
	wantCode(t, err, amqpwire.CodePreconditionFailed, "")
}

// A poison message that consumers keep rejecting with requeue is
// dead-lettered once it passes the delivery limit; its redeliveries carry
// x-delivery-count.
func TestQuorumPoisonMessage(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("poison", true)
	e.declareQueueArgs("work", true, withArgs(quorum, "x-delivery-limit", int32(2),
		"x-dead-letter-exchange", "", "x-dead-letter-routing-key", "poison"))
	waitDurable(t, e.publish(persistent("", "work", "bad")))
	c := newConsumer(-1)
	e.consume("work", c, false)
	for i := 0; i < 3; i++ {
		ds := c.deliveries()
		if len(ds) != i+1 {
			t.Fatalf("after %d requeues %d deliveries", i, len(ds))
		}
		d := ds[i]
		count, has := d.Message.Properties.Headers["x-delivery-count"]
		switch {
		case i == 0 && (has || d.Redelivered):
			t.Fatalf("first delivery has x-delivery-count %v / redelivered %v", count, d.Redelivered)
		case i > 0 && (count != int64(i) || !d.Redelivered):
			t.Fatalf("delivery %d: x-delivery-count %v (%T), redelivered %v", i+1, count, count, d.Redelivered)
		}
		e.v.Requeue("work", d.Tag)
	}
	if n := len(c.deliveries()); n != 3 {
		t.Fatalf("%d deliveries, want 3 (limit 2 allows two returns)", n)
	}
	e.wantEmpty("work")
	d := e.get("poison")
	ds := deaths(t, d.Message)
	if string(d.Message.Body) != "bad" || ds[0]["reason"] != "delivery_limit" || ds[0]["queue"] != "work" {
		t.Fatalf("dead letter %s %v", d.Message.Body, ds)
	}
	if _, has := d.Message.Properties.Headers["x-delivery-count"]; has {
		t.Error("the dead letter carries x-delivery-count")
	}
	// basic.reject without requeue is an ordinary rejection.
	e.publish(msg("", "work", "rejected"))
	last := c.deliveries()[len(c.deliveries())-1]
	e.v.Discard("work", last.Tag)
	if d := e.get("poison"); deaths(t, d.Message)[0]["reason"] != "rejected" {
		t.Fatal("discard in a quorum queue is not reason rejected")
	}
}

func TestQuorumDefaultDeliveryLimitAndPriorities(t *testing.T) {
	e := newEnv(t)
	e.declareQueueArgs("q", true, quorum) // default limit 20, no dead-letter exchange: dropped
	e.publish(msg("", "q", "m"))
	for i := 0; i <= 20; i++ {
		d := e.get("q")
		if i > 0 && d.Message.Properties.Headers["x-delivery-count"] != int64(i) {
			t.Fatalf("get %d: x-delivery-count %v", i, d.Message.Properties.Headers["x-delivery-count"])
		}
		e.v.Requeue("q", d.Tag)
	}
	e.wantEmpty("q")

	// Two priority levels: 5 and above before the rest.
	for _, p := range []struct {
		body string
		prio uint8
	}{{"n1", 0}, {"h1", 5}, {"n2", 4}, {"h2", 9}} {
		e.publish(prioMsg("q", p.body, p.prio))
	}
	if got := e.drain("q"); !slices.Equal(got, []string{"h1", "h2", "n1", "n2"}) {
		t.Fatalf("quorum priority order %v", got)
	}
	// Negative limit: unlimited.
	e.declareQueueArgs("u", true, withArgs(quorum, "x-delivery-limit", int32(-1)))
	e.publish(msg("", "u", "m"))
	for i := 0; i < 30; i++ {
		e.v.Requeue("u", e.get("u").Tag)
	}
	if e.messages("u") != 1 {
		t.Fatal("unlimited quorum queue dropped the message")
	}
}

func TestQuorumDeliveryCountSurvivesRestart(t *testing.T) {
	for _, clean := range []bool{true, false} {
		e := newEnv(t)
		e.declareQueueArgs("q", true, withArgs(quorum, "x-delivery-limit", int32(3)))
		waitDurable(t, e.publish(persistent("", "q", "m")))
		for range 2 {
			e.v.Requeue("q", e.get("q").Tag)
		}
		if clean {
			e.restart()
		} else {
			q, _ := e.v.lookupQueue("q")
			if err := q.local().Housekeep(); err != nil { // what the housekeeper does within 250 ms
				t.Fatal(err)
			}
			e.crash()
		}
		d := e.get("q")
		if got := d.Message.Properties.Headers["x-delivery-count"]; got != int64(2) || !d.Redelivered {
			t.Fatalf("clean=%v: after restart x-delivery-count %v redelivered %v", clean, got, d.Redelivered)
		}
		e.v.Requeue("q", d.Tag) // third return: still within the limit
		e.v.Requeue("q", e.get("q").Tag)
		e.wantEmpty("q") // fourth return passed the limit
	}
}

func TestQuorumKeepsTransientMessages(t *testing.T) {
	e := newEnv(t)
	e.declareQueueArgs("qq", true, quorum)
	e.declareQueue("classic", true)
	e.declareExchange("fan", "fanout", true, nil)
	e.bind("qq", "fan", "", nil)
	e.bind("classic", "fan", "", nil)
	waitDurable(t, e.publish(msg("fan", "", "transient")))
	e.restart()
	if got := e.drain("qq"); !slices.Equal(got, []string{"transient"}) {
		t.Fatalf("quorum queue after restart: %v", got)
	}
	e.wantEmpty("classic")
}
