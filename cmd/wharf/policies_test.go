package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// wharfCLI runs one wharf command in-process and returns its output.
func wharfCLI(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(args, stdio{in: strings.NewReader(""), out: &out, err: &errOut}); code != 0 {
		t.Fatalf("wharf %v: exit %d\n%s%s", args, code, out.String(), errOut.String())
	}
	return out.String()
}

// expectDeadLettered publishes to work (no consumers) and waits, with a
// deadline, for the message to reach dead with x-death reason expired.
func expectDeadLettered(t *testing.T, url, body string) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("dlx", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"dead", "work.orders"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.QueueBind("dead", "", "dlx", false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("dead", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = ch.PublishWithContext(ctx, "", "work.orders", false, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-deliveries:
		if string(d.Body) != body {
			t.Fatalf("dead-lettered %q, want %q", d.Body, body)
		}
		deaths, _ := d.Headers["x-death"].([]any)
		if len(deaths) == 0 {
			t.Fatalf("no x-death: %v", d.Headers)
		}
		death, _ := deaths[0].(amqp.Table)
		if death["reason"] != "expired" || death["queue"] != "work.orders" {
			t.Fatalf("x-death %v, want reason expired from work.orders", death)
		}
	case <-ctx.Done():
		t.Fatal("message was not dead-lettered within 5 s")
	}
}

func TestPoliciesCLIEndToEnd(t *testing.T) {
	dir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dir))
	server := "--http-server=" + n.HTTPAddr()
	wharfCLI(t, "policies", "set", "ttl", `^work\.`, `{"message-ttl":100,"dead-letter-exchange":"dlx"}`,
		"--priority", "1", "--apply-to", "queues", server)
	list := wharfCLI(t, "policies", "list", server)
	if !strings.Contains(list, "ttl") || !strings.Contains(list, `"message-ttl":100`) || !strings.Contains(list, "queues") {
		t.Fatalf("policies list:\n%s", list)
	}
	expectDeadLettered(t, nodetest.AMQPURL(n), "first")

	// The API answers as RabbitMQ's for a missing queue.
	req, _ := http.NewRequest("GET", nodetest.HTTPURL(n)+"/api/queues/%2F/missing", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || strings.TrimSpace(string(b)) != `{"error":"Object Not Found","reason":"Not Found"}` {
		t.Fatalf("missing queue: %d %s", resp.StatusCode, b)
	}

	// After a restart the policy still holds.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n2 := nodetest.Start(t, nodetest.WithDataDir(dir))
	expectDeadLettered(t, nodetest.AMQPURL(n2), "second")

	wharfCLI(t, "policies", "clear", "ttl", "--http-server="+n2.HTTPAddr())
	if list := wharfCLI(t, "policies", "list", "--http-server="+n2.HTTPAddr()); strings.Contains(list, "ttl") {
		t.Fatalf("policy still listed after clear:\n%s", list)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"policies", "clear", "ttl", "--http-server=" + n2.HTTPAddr()}, stdio{out: &out, err: &errOut}); code != 1 ||
		!strings.Contains(errOut.String(), `no policy "ttl" on vhost "/"`) {
		t.Fatalf("clearing a missing policy: exit %d, %s", code, errOut.String())
	}
}
