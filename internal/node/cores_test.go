package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestQueueDataWithoutMetadataRefusesStart: the metadata log defines the
// durable queues too, so a data directory holding only queue logs (no
// partition) refuses to start once the metadata log is gone, naming the
// queues' directory, rather than setting the queue data aside.
func TestQueueDataWithoutMetadataRefusesStart(t *testing.T) {
	dir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dir))
	conn, err := amqp091.Dial(nodetest.AMQPURL(n))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("orders", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	confirm, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "orders", false, false,
		amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("kept")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := confirm.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("publish not confirmed: %v %v", ok, err)
	}
	conn.Close()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Leave the queues' data alone: the metadata log goes, and with it
	// the coordinators' partitions, which would refuse the start on
	// their own.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "queues" {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err = node.Start(node.Config{DataDir: dir, KafkaAddr: "127.0.0.1:0"})
	if err == nil {
		n.Close(ctx)
		t.Fatal("started on durable queue data whose metadata log is gone")
	}
	if want := "0 partitions and 1 durable queues"; !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), filepath.Join(dir, "queues")) {
		t.Errorf("refusal %q does not count the queue (%q) and name %s", err, want, filepath.Join(dir, "queues"))
	}
}
