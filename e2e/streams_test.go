package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// Stream queues on a whole node: an AMQP stream queue is the Kafka topic of
// the same name, readable and writable from both protocols, and durable
// across a restart.

func streamChannel(t *testing.T, n *node.Node) *amqp091.Channel {
	t.Helper()
	conn, err := amqp091.Dial(nodetest.AMQPURL(n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func nextDelivery(t *testing.T, ds <-chan amqp091.Delivery) amqp091.Delivery {
	t.Helper()
	select {
	case d, ok := <-ds:
		if !ok {
			t.Fatal("deliveries closed")
		}
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	return amqp091.Delivery{}
}

func TestStreamQueueOnNode(t *testing.T) {
	dir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dir))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ch := streamChannel(t, n)
	if _, err := ch.QueueDeclare("events", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "events", false, false, amqp091.Publishing{
			Body: []byte(fmt.Sprint("amqp-", i)), Headers: amqp091.Table{"n": int64(i), "src": "amqp"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("confirm %d: %v %v", i, ok, err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"events": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Value: []byte("kafka-3"),
		Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("kafka")}}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got []*kgo.Record
	for len(got) < 4 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	cl.Close()
	for i, r := range got {
		src := ""
		for _, h := range r.Headers {
			if h.Key == "src" {
				src = string(h.Value)
			}
		}
		if want := map[bool]string{true: "kafka", false: "amqp"}[i == 3]; src != want || r.Offset != int64(i) {
			t.Fatalf("Kafka record %d: src %q offset %d value %q", i, src, r.Offset, r.Value)
		}
	}

	// Restart the node on the same data: the stream queue and its log
	// are still there.
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n = nodetest.Start(t, nodetest.WithDataDir(dir))
	ch = streamChannel(t, n)
	if err := ch.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume("events", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		d := nextDelivery(t, ds)
		if d.Headers["x-stream-offset"] != int64(i) {
			t.Fatalf("delivery %d: offset %v", i, d.Headers["x-stream-offset"])
		}
		if i < 3 && (string(d.Body) != fmt.Sprint("amqp-", i) || d.Headers["n"] != int64(i)) {
			t.Fatalf("delivery %d: %q %v", i, d.Body, d.Headers)
		}
		if i == 3 && (string(d.Body) != "kafka-3" || d.Headers["src"] != "kafka" || d.RoutingKey != "events") {
			t.Fatalf("delivery 3: %q %v key %q", d.Body, d.Headers, d.RoutingKey)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
}
