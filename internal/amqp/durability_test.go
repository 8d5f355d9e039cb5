package amqp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestDurabilityAcrossNodeRestart is the durability demonstration, on a
// whole node: two durable queues, 100 persistent messages to one and 100
// transient ones to the other, every one confirmed; after the node is
// closed and another started on the same data directory, the persistent
// messages are all there, in order, and the transient ones are gone while
// their queue remains.
func TestDurabilityAcrossNodeRestart(t *testing.T) {
	dataDir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir))
	conn, err := amqp091.Dial(nodetest.AMQPURL(n))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"tx-demo", "tx-demo-transient"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 200))

	const count = 100
	for _, q := range []struct {
		name string
		mode uint8
	}{{"tx-demo", amqp091.Persistent}, {"tx-demo-transient", amqp091.Transient}} {
		for i := range count {
			if err := ch.PublishWithContext(t.Context(), "", q.name, false, false,
				amqp091.Publishing{DeliveryMode: q.mode, Body: msgBody(i)}); err != nil {
				t.Fatal(err)
			}
		}
		acks, nacks := 0, 0
		for acks+nacks < count {
			select {
			case c := <-confirms:
				if c.Ack {
					acks++
				} else {
					nacks++
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: only %d acks and %d nacks", q.name, acks, nacks)
			}
		}
		t.Logf("%s: %d acks, %d nacks", q.name, acks, nacks)
		if acks != count || nacks != 0 {
			t.Errorf("%s: %d acks and %d nacks, want %d and 0", q.name, acks, nacks, count)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n2 := nodetest.Start(t, nodetest.WithDataDir(dataDir))
	conn2, err := amqp091.Dial(nodetest.AMQPURL(n2))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	ch2, err := conn2.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		name     string
		messages int
	}{{"tx-demo", count}, {"tx-demo-transient", 0}} {
		q, err := ch2.QueueDeclarePassive(want.name, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("%s after restart: %v", want.name, err)
		}
		t.Logf("after restart %s holds %d messages", want.name, q.Messages)
		if q.Messages != want.messages {
			t.Errorf("%s holds %d messages after restart, want %d", want.name, q.Messages, want.messages)
		}
	}
	for i := range count {
		d, ok, err := ch2.Get("tx-demo", true)
		if err != nil || !ok || string(d.Body) != string(msgBody(i)) {
			t.Fatalf("message %d after restart: %q ok=%v err=%v", i, d.Body, ok, err)
		}
	}
}

// TestNodeAMQPListener: the node binds AMQP where configured, and Close
// disconnects clients with 320 CONNECTION_FORCED before the broker closes.
func TestNodeAMQPListener(t *testing.T) {
	n := nodetest.Start(t)
	if n.AMQPAddr() == "" {
		t.Fatal("no AMQP listener")
	}
	conn, err := amqp091.Dial(nodetest.AMQPURL(n))
	if err != nil {
		t.Fatal(err)
	}
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	if conn.Properties["product"] != "Wharf" {
		t.Errorf("product %v", conn.Properties["product"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp091.ConnectionForced {
			t.Errorf("close %v, want 320 CONNECTION_FORCED", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("client not disconnected by Close")
	}
	if n.Err() != nil {
		t.Errorf("Err after Close = %v", n.Err())
	}

	without := nodetest.Start(t, nodetest.WithConfig(func(c *node.Config) { c.AMQPAddr = "" }))
	if without.AMQPAddr() != "" {
		t.Errorf("AMQPAddr() = %q with no AMQP address configured", without.AMQPAddr())
	}
}

func msgBody(i int) []byte { return fmt.Appendf(nil, "message %03d", i) }
