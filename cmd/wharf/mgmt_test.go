package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestManagementCLIEndToEnd drives `wharf queues|exchanges|bindings|
// connections|definitions` against a node, with an amqp091-go client
// making the objects and holding the connection.
func TestManagementCLIEndToEnd(t *testing.T) {
	n := nodetest.Start(t)
	server := "--http-server=" + n.HTTPAddr()
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("billing-worker")
	conn, err := amqp.DialConfig(nodetest.AMQPURL(n), amqp.Config{Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("invoices", "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("billing", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("billing", "invoice.#", "invoices", false, nil); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"first", "second"} {
		if err := ch.PublishWithContext(context.Background(), "invoices", "invoice.eu", false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}

	lines := func(out string) []string { return strings.Split(strings.TrimSpace(out), "\n") }
	var list string
	deadline := time.Now().Add(10 * time.Second)
	for { // the publishes are asynchronous: wait for both
		list = wharfCLI(t, "queues", "list", server)
		if strings.Contains(list, "billing  classic  true     2") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := lines(list); len(got) != 2 || !strings.HasPrefix(got[0], "NAME") || !strings.HasPrefix(got[1], "billing  classic  true     2      0") {
		t.Fatalf("queues list:\n%s", list)
	}
	if out := wharfCLI(t, "exchanges", "list", server); !strings.Contains(out, "invoices") || !strings.Contains(out, "(default)") {
		t.Fatalf("exchanges list:\n%s", out)
	}
	if out := wharfCLI(t, "bindings", "list", server); !strings.Contains(out, "invoices   billing      queue             invoice.#") {
		t.Fatalf("bindings list:\n%s", out)
	}

	// get looks without taking by default; --ackmode ack_requeue_false takes.
	out := wharfCLI(t, "queues", "get", "billing", server, "--count", "5")
	if got := lines(out); len(got) != 3 || !strings.HasSuffix(got[1], "first") || !strings.HasSuffix(got[2], "second") {
		t.Fatalf("queues get:\n%s", out)
	}
	out = wharfCLI(t, "queues", "get", "billing", server, "--ackmode", "ack_requeue_false")
	if !strings.Contains(out, "invoice.eu   \"invoices\"  1          true") {
		t.Fatalf("queues get (taking, a redelivery):\n%s", out)
	}

	defsFile := filepath.Join(t.TempDir(), "defs.json")
	if out := wharfCLI(t, "definitions", "export", defsFile, server); !strings.Contains(out, "Exported definitions") {
		t.Fatalf("definitions export: %s", out)
	}
	if out := wharfCLI(t, "queues", "purge", "billing", server); !strings.Contains(out, `Purged queue "billing"`) {
		t.Fatalf("queues purge: %s", out)
	}
	if code, _, stderr := runCLI("queues", "delete", "billing", "--if-unused", "--if-empty", server); code != 0 {
		t.Fatalf("queues delete: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI("queues", "delete", "billing", server); code != 1 || !strings.Contains(stderr, "404") && !strings.Contains(stderr, "Not Found") {
		t.Fatalf("deleting a missing queue: exit %d: %s", code, stderr)
	}

	// The export brings the queue and its binding back on another node.
	other := nodetest.Start(t)
	if out := wharfCLI(t, "definitions", "import", defsFile, "--http-server="+other.HTTPAddr()); !strings.Contains(out, "Imported definitions") {
		t.Fatalf("definitions import: %s", out)
	}
	if out := wharfCLI(t, "bindings", "list", "--http-server="+other.HTTPAddr()); !strings.Contains(out, "invoice.#") {
		t.Fatalf("bindings after import:\n%s", out)
	}
	data, err := os.ReadFile(defsFile)
	if err != nil || !strings.Contains(string(data), `"name": "billing"`) {
		t.Fatalf("exported file: %v\n%s", err, data)
	}

	// connections list shows the client's connection_name; close drops it.
	out = wharfCLI(t, "connections", "list", server)
	got := lines(out)
	if len(got) != 2 || !strings.Contains(got[1], "billing-worker") {
		t.Fatalf("connections list:\n%s", out)
	}
	name := strings.Split(got[1], "  ")[0]
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	wharfCLI(t, "connections", "close", name, server)
	select {
	case e := <-closed:
		if e == nil || e.Code != 320 {
			t.Fatalf("close: %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was not closed")
	}
}
