package amqp

import (
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestPassiveDeclareOfMissingQueue: 404 closes the channel, not the
// connection.
func TestPassiveDeclareOfMissingQueue(t *testing.T) {
	b := startBroker(t)
	conn := b.dial()
	ch := openChannel(t, conn)
	_, err := ch.QueueDeclarePassive("missing", false, false, false, false, nil)
	e := wantCode(t, err, amqp091.NotFound)
	if !strings.Contains(e.Reason, "no queue 'missing' in vhost '/'") {
		t.Errorf("reason %q", e.Reason)
	}
	if conn.IsClosed() {
		t.Fatal("connection closed by a channel error")
	}
	ch2 := openChannel(t, conn)
	if err := ch2.ExchangeDeclarePassive("missing", "direct", false, false, false, false, nil); err == nil {
		t.Fatal("passive declare of a missing exchange succeeded")
	} else {
		wantCode(t, err, amqp091.NotFound)
	}
	declareQueue(t, openChannel(t, conn), "fine", false)
}

// TestInequivalentRedeclare: 406 PRECONDITION_FAILED.
func TestInequivalentRedeclare(t *testing.T) {
	b := startBroker(t)
	conn := b.dial()
	declareQueue(t, openChannel(t, conn), "q", true)
	_, err := openChannel(t, conn).QueueDeclare("q", false, false, false, false, nil)
	e := wantCode(t, err, amqp091.PreconditionFailed)
	if !strings.Contains(e.Reason, "inequivalent arg 'durable'") {
		t.Errorf("reason %q", e.Reason)
	}
	ch := openChannel(t, conn)
	if err := ch.ExchangeDeclare("x", "direct", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	wantCode(t, ch.ExchangeDeclare("x", "topic", false, false, false, false, nil), amqp091.PreconditionFailed)
}

// TestExclusiveQueueOfAnotherConnection: 405 RESOURCE_LOCKED, and the
// queue goes away with its owner.
func TestExclusiveQueueOfAnotherConnection(t *testing.T) {
	b := startBroker(t)
	owner := b.dial()
	och := openChannel(t, owner)
	if _, err := och.QueueDeclare("mine", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	other := b.channel()
	_, err := other.QueueDeclare("mine", false, false, true, false, nil)
	wantCode(t, err, amqp091.ResourceLocked)

	other = b.channel()
	_, err = other.Consume("mine", "", false, false, false, false, nil)
	wantCode(t, err, amqp091.ResourceLocked)

	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "exclusive queue deleted with its connection", func() bool {
		for _, q := range b.vhost().Queues() {
			if q.Name == "mine" {
				return false
			}
		}
		return true
	})
}

// TestServerNamedQueueAndShortcuts: queue.declare with an empty name, then
// "" meaning the last declared queue in bind, consume and get.
func TestServerNamedQueueAndShortcuts(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(q.Name, "amq.gen-") {
		t.Fatalf("server-named queue %q", q.Name)
	}
	if err := ch.QueueBind("", "k", "amq.direct", false, nil); err != nil {
		t.Fatal(err)
	}
	pub := newConfirmedPublisher(t, b.channel())
	pub.publish("amq.direct", "k", amqp091.Publishing{Body: []byte("via last queue")})
	d, ok, err := ch.Get("", true)
	if err != nil || !ok || string(d.Body) != "via last queue" {
		t.Fatalf("get from last queue: %q ok=%v err=%v", d.Body, ok, err)
	}
	// Before any declare, "" is 404.
	_, _, err = b.channel().Get("", true)
	wantCode(t, err, amqp091.NotFound)
}

// TestDeclareCounts: declare-ok reports ready messages and consumers;
// purge and delete report what they removed.
func TestDeclareCounts(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	declareQueue(t, ch, "counts", false)
	publishN(t, b, "counts", 3)
	consume(t, b.channel(), "counts", false) // takes all 3, unacked
	waitFor(t, "deliveries", func() bool { return b.queueInfo("counts").Messages == 0 })
	q, err := ch.QueueDeclarePassive("counts", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages != 0 || q.Consumers != 1 {
		t.Errorf("declare-ok messages=%d consumers=%d, want 0 and 1", q.Messages, q.Consumers)
	}
	declareQueue(t, ch, "purged", false)
	publishN(t, b, "purged", 2)
	if n, err := ch.QueuePurge("purged", false); err != nil || n != 2 {
		t.Errorf("purge: %d %v", n, err)
	}
	publishN(t, b, "purged", 1)
	if n, err := ch.QueueDelete("purged", false, false, false); err != nil || n != 1 {
		t.Errorf("delete: %d %v", n, err)
	}
}
