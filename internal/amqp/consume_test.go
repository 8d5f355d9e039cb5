package amqp

import (
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// publishN puts n persistent messages on queue through the default
// exchange and waits for their confirms.
func publishN(t *testing.T, b *testBroker, queue string, n int) {
	t.Helper()
	pub := newConfirmedPublisher(t, b.channel())
	for i := range n {
		if !pub.publish("", queue, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: body(i)}) {
			t.Fatalf("publish %d nacked", i)
		}
	}
}

// TestFairDispatchWithPrefetch: two consumers with prefetch 1; one holds
// its message unacked, so the other gets every remaining message.
func TestFairDispatchWithPrefetch(t *testing.T) {
	b := startBroker(t)
	slowCh, fastCh := b.channel(), b.channel()
	declareQueue(t, slowCh, "work", false)
	for _, ch := range []*amqp091.Channel{slowCh, fastCh} {
		if err := ch.Qos(1, 0, false); err != nil {
			t.Fatal(err)
		}
	}
	slow := consume(t, slowCh, "work", false)
	fast := consume(t, fastCh, "work", false)
	const n = 20
	publishN(t, b, "work", n)

	got := map[string]int{}
	held := next(t, slow) // the slow consumer's only message, never acked
	got["slow"]++
	for got["fast"]+got["slow"] < n {
		select {
		case d := <-fast:
			got["fast"]++
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-slow:
			t.Fatal("the slow consumer got a second message while holding an unacked one (prefetch 1)")
		case <-time.After(testTimeout):
			t.Fatalf("stuck after %v", got)
		}
	}
	if got["slow"] != 1 || got["fast"] != n-1 {
		t.Fatalf("dispatch %v, want slow 1 and fast %d", got, n-1)
	}
	if err := held.Ack(false); err != nil {
		t.Fatal(err)
	}
}

// TestRoundRobin: consumers with credit share a queue in turn.
func TestRoundRobin(t *testing.T) {
	b := startBroker(t)
	ch1, ch2 := b.channel(), b.channel()
	declareQueue(t, ch1, "rr", false)
	d1, d2 := consume(t, ch1, "rr", true), consume(t, ch2, "rr", true)
	publishN(t, b, "rr", 10)
	for range 5 {
		next(t, d1)
		next(t, d2)
	}
}

// TestChannelPrefetchGlobal: basic.qos global=true limits the channel as a
// whole, across its consumers.
func TestChannelPrefetchGlobal(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	declareQueue(t, ch, "g1", false)
	declareQueue(t, ch, "g2", false)
	publishN(t, b, "g1", 5)
	publishN(t, b, "g2", 5)
	if err := ch.Qos(3, 0, true); err != nil {
		t.Fatal(err)
	}
	c1, c2 := consume(t, ch, "g1", false), consume(t, ch, "g2", false)
	var held []amqp091.Delivery
	for len(held) < 3 {
		select {
		case d := <-c1:
			held = append(held, d)
		case d := <-c2:
			held = append(held, d)
		case <-time.After(testTimeout):
			t.Fatalf("got %d deliveries, want 3", len(held))
		}
	}
	// The channel is at its limit: nothing more arrives until an ack.
	// Both queues still hold messages, so a fourth delivery would be sent
	// at once; a round trip on the channel proves none was.
	if _, err := ch.QueueDeclarePassive("g1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-c1:
		t.Fatalf("delivery %q over the channel prefetch", d.Body)
	case d := <-c2:
		t.Fatalf("delivery %q over the channel prefetch", d.Body)
	default:
	}
	if got := b.queueInfo("g1").Messages + b.queueInfo("g2").Messages; got != 7 {
		t.Fatalf("%d ready messages left, want 7", got)
	}
	if err := held[0].Ack(false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c1:
	case <-c2:
	case <-time.After(testTimeout):
		t.Fatal("no delivery after an ack freed channel credit")
	}
}

// TestRedeliveryAfterConsumerConnectionDies: unacked deliveries go back to
// the queue, marked redelivered, when the consumer's TCP connection drops.
func TestRedeliveryAfterConsumerConnectionDies(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	declareQueue(t, ch, "jobs", true)
	publishN(t, b, "jobs", 3)

	c := dialRaw(t, b.addr, 0)
	c.openChannel(1)
	c.send(1, &amqpwire.BasicConsume{Queue: "jobs", ConsumerTag: "doomed"})
	c.expect(1, amqpwire.BasicConsumeOKID)
	for range 3 {
		c.expect(1, amqpwire.BasicDeliverID)
	}
	c.nc.Close() // no close handshake: the process "died"

	deliveries := consume(t, ch, "jobs", false)
	for i := range 3 {
		d := next(t, deliveries)
		if !d.Redelivered || string(d.Body) != string(body(i)) {
			t.Errorf("delivery %d: redelivered=%v body %q, want redelivered %q", i, d.Redelivered, d.Body, body(i))
		}
		d.Ack(false)
	}
}

// TestUnackedRequeuedOnChannelClose: closing a channel returns its
// unacknowledged messages, in order, to the front of the queue.
func TestUnackedRequeuedOnChannelClose(t *testing.T) {
	b := startBroker(t)
	conn := b.dial()
	ch := openChannel(t, conn)
	declareQueue(t, ch, "q", false)
	publishN(t, b, "q", 4)
	first, _, _ := ch.Get("q", false)
	second, _, _ := ch.Get("q", false)
	if first.MessageCount != 3 || second.MessageCount != 2 {
		t.Errorf("get-ok message counts %d, %d; want 3, 2", first.MessageCount, second.MessageCount)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	ch2 := openChannel(t, conn)
	for i := range 4 {
		d, ok, err := ch2.Get("q", true)
		if err != nil || !ok {
			t.Fatalf("get %d: ok=%v err=%v", i, ok, err)
		}
		if string(d.Body) != string(body(i)) || d.Redelivered != (i < 2) {
			t.Errorf("get %d: %q redelivered=%v", i, d.Body, d.Redelivered)
		}
	}
}

// TestAckNackRejectRecover covers settlement with multiple and requeue.
func TestAckNackRejectRecover(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	declareQueue(t, ch, "s", false)
	publishN(t, b, "s", 6)
	d := consume(t, ch, "s", false)
	var got []amqp091.Delivery
	for range 6 {
		got = append(got, next(t, d))
	}
	// ack 1-2 with multiple, reject 3 without requeue, nack 4-5 with
	// requeue (they come back redelivered), leave 6 for recover.
	if err := got[1].Ack(true); err != nil {
		t.Fatal(err)
	}
	if err := got[2].Reject(false); err != nil {
		t.Fatal(err)
	}
	if err := got[4].Nack(true, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{3, 4} {
		r := next(t, d)
		if !r.Redelivered || string(r.Body) != string(body(want)) {
			t.Errorf("requeued: %q redelivered=%v, want %q", r.Body, r.Redelivered, body(want))
		}
		r.Ack(false)
	}
	if err := ch.Recover(true); err != nil {
		t.Fatal(err)
	}
	r := next(t, d)
	if !r.Redelivered || string(r.Body) != string(body(5)) {
		t.Errorf("recovered: %q redelivered=%v", r.Body, r.Redelivered)
	}
	r.Ack(false)
	// Everything is settled: acking an old tag again is 406.
	notify := ch.NotifyClose(make(chan *amqp091.Error, 1))
	got[0].Ack(false)
	if e := closeError(t, notify); e.Code != amqp091.PreconditionFailed || !strings.Contains(e.Reason, "unknown delivery tag 1") {
		t.Errorf("double ack: %v", e)
	}
	if got := b.queueInfo("s"); got.Messages != 0 {
		t.Errorf("queue holds %d, want 0", got.Messages)
	}
}

// TestGetAndGetEmpty covers basic.get.
func TestGetAndGetEmpty(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	declareQueue(t, ch, "g", false)
	if _, ok, err := ch.Get("g", false); ok || err != nil {
		t.Fatalf("empty queue: ok=%v err=%v", ok, err)
	}
	publishN(t, b, "g", 1)
	d, ok, err := ch.Get("g", false)
	if !ok || err != nil || string(d.Body) != string(body(0)) || d.MessageCount != 0 {
		t.Fatalf("get: %+v ok=%v err=%v", d, ok, err)
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}
}

// TestServerCancelsConsumerOfDeletedQueue: with consumer_cancel_notify
// the consumer hears basic.cancel when its queue is deleted.
func TestServerCancelsConsumerOfDeletedQueue(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	declareQueue(t, ch, "doomed", false)
	cancels := ch.NotifyCancel(make(chan string, 1))
	d, err := ch.Consume("doomed", "my-consumer", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := b.channel()
	if _, err := other.QueueDelete("doomed", false, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case tag := <-cancels:
		if tag != "my-consumer" {
			t.Errorf("cancelled %q", tag)
		}
	case <-time.After(testTimeout):
		t.Fatal("no basic.cancel from the server")
	}
	select {
	case _, open := <-d:
		if open {
			t.Error("delivery after cancel")
		}
	case <-time.After(testTimeout):
		t.Fatal("deliveries not closed after cancel")
	}
	// The channel is still usable.
	declareQueue(t, ch, "after", false)
}

// TestConsumerTagsAndCancel: server-generated tags look like RabbitMQ's,
// basic.cancel stops deliveries and leaves unacked ones settleable.
func TestConsumerTagsAndCancel(t *testing.T) {
	b := startBroker(t)
	c := dialRaw(t, b.addr, 0)
	c.openChannel(1)
	c.send(1, &amqpwire.QueueDeclare{Queue: "tags"})
	c.expect(1, amqpwire.QueueDeclareOKID)
	c.send(1, &amqpwire.BasicConsume{Queue: "tags"})
	tag := c.expect(1, amqpwire.BasicConsumeOKID).(*amqpwire.BasicConsumeOK).ConsumerTag
	if !strings.HasPrefix(tag, "amq.ctag-") || len(tag) != len("amq.ctag-")+22 {
		t.Errorf("server-generated tag %q", tag)
	}
	publishN(t, b, "tags", 1)
	c.expect(1, amqpwire.BasicDeliverID)
	c.send(1, &amqpwire.BasicCancel{ConsumerTag: tag})
	c.expect(1, amqpwire.BasicCancelOKID)
	publishN(t, b, "tags", 1)
	// The delivery of the cancelled consumer can still be acked.
	c.send(1, &amqpwire.BasicAck{DeliveryTag: 1})
	c.send(1, &amqpwire.QueueDeclare{Queue: "tags", Passive: true})
	ok := c.expect(1, amqpwire.QueueDeclareOKID)
	if n := ok.(*amqpwire.QueueDeclareOK).MessageCount; n != 1 {
		t.Errorf("queue has %d ready messages, want 1 (published after the cancel)", n)
	}
}

// TestConsumerTimeoutClosesChannel: a delivery left unacked past the
// consumer timeout closes its channel with 406, as RabbitMQ does, and the
// message goes back to the queue; the connection survives.
func TestConsumerTimeoutClosesChannel(t *testing.T) {
	b := startBroker(t)
	conn := b.dial()
	ch := openChannel(t, conn)
	if _, err := ch.QueueDeclare("slow", false, false, false, false, amqp091.Table{"x-consumer-timeout": 200}); err != nil {
		t.Fatal(err)
	}
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	publishN(t, b, "slow", 1)
	d := consume(t, ch, "slow", false)
	next(t, d) // never acked
	e := closeError(t, closed)
	if e.Code != amqp091.PreconditionFailed || !strings.Contains(e.Reason, "delivery acknowledgement on channel 1 timed out") {
		t.Fatalf("close %v", e)
	}
	again, ok, err := openChannel(t, conn).Get("slow", true)
	if err != nil || !ok || !again.Redelivered {
		t.Fatalf("after the timeout: ok=%v redelivered=%v err=%v", ok, again.Redelivered, err)
	}
}

// TestRejectPublishIsNacked: a queue full with x-overflow reject-publish
// refuses the message, and the publisher hears basic.nack.
func TestRejectPublishIsNacked(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	if _, err := ch.QueueDeclare("full", false, false, false, false,
		amqp091.Table{"x-max-length": 1, "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	pub := newConfirmedPublisher(t, b.channel())
	if !pub.publish("", "full", amqp091.Publishing{Body: []byte("fits")}) {
		t.Fatal("first publish nacked")
	}
	if pub.publish("", "full", amqp091.Publishing{Body: []byte("refused")}) {
		t.Fatal("publish to a full reject-publish queue acked")
	}
	if n := b.queueInfo("full").Messages; n != 1 {
		t.Errorf("queue holds %d, want 1", n)
	}
}

// TestConsumerPriority: x-priority is passed to the queue, which serves the
// higher-priority consumer while it has credit.
func TestConsumerPriority(t *testing.T) {
	b := startBroker(t)
	lowCh, highCh := b.channel(), b.channel()
	declareQueue(t, lowCh, "prio", false)
	for _, ch := range []*amqp091.Channel{lowCh, highCh} {
		if err := ch.Qos(3, 0, false); err != nil {
			t.Fatal(err)
		}
	}
	low, err := lowCh.Consume("prio", "low", false, false, false, false, amqp091.Table{"x-priority": 0})
	if err != nil {
		t.Fatal(err)
	}
	high, err := highCh.Consume("prio", "high", false, false, false, false, amqp091.Table{"x-priority": 10})
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, b, "prio", 3)
	for range 3 {
		next(t, high)
	}
	select {
	case d := <-low:
		t.Fatalf("low-priority consumer got %q while the high one had credit", d.Body)
	default:
	}
}
