package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// The management API (RabbitMQ's HTTP API) through the tools that use it:
// rabbitmqadmin, and amqp091-go's connection recovery, whose own tests
// find their connection in GET /api/connections/ and drop it with DELETE
// /api/connections/{name}.

// dialNamed connects with amqp091-go under a connection_name, with
// options, closed at test end.
func dialNamed(t *testing.T, n *node.Node, name string, recovery *amqp.Recovery) *amqp.Connection {
	t.Helper()
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)
	conn, err := amqp.DialConfig(nodetest.AMQPURL(n), amqp.Config{Properties: props, Recovery: recovery})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// apiConnectionName finds a connection's RabbitMQ name by the
// connection_name its client announced, as amqp091-go's test utilities do.
func apiConnectionName(t *testing.T, n *node.Node, connectionName string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", nodetest.HTTPURL(n)+"/api/connections/", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var conns []struct {
		Name             string `json:"name"`
		ClientProperties struct {
			ConnectionName string `json:"connection_name"`
		} `json:"client_properties"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&conns); err != nil {
		t.Fatalf("GET /api/connections/: %d: %v", resp.StatusCode, err)
	}
	for _, c := range conns {
		if c.ClientProperties.ConnectionName == connectionName {
			return c.Name
		}
	}
	t.Fatalf("no connection named %q in %+v", connectionName, conns)
	return ""
}

// dropConnection is amqp091-go's DropConnection: DELETE as guest.
func dropConnection(t *testing.T, n *node.Node, name string) {
	t.Helper()
	req, _ := http.NewRequest("DELETE", nodetest.HTTPURL(n)+"/api/connections/"+url.PathEscape(name), nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE /api/connections/%s: %d %s", name, resp.StatusCode, b)
	}
}

// TestConnectionRecoveryThroughTheAPI is what amqp091-go's
// TestConnectionRecoveryPublish does, through amqp091-go's own recovery:
// the connection, dropped through the API, comes back with its channel,
// topology and consumer, and publishing and consuming go on.
func TestConnectionRecoveryThroughTheAPI(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	// Recovery as amqp091-go's tests configure it, retrying sooner than
	// its default 5 s.
	conn := dialNamed(t, n, "recovery-publish", &amqp.Recovery{
		ReconnectionConfig: &amqp.ReconnectionConfig{MaxRetryCount: 50, RetryInterval: 200 * time.Millisecond},
	})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("recovery_exchange", "direct", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("recovery_queue", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("recovery_queue", "key", "recovery_exchange", false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("recovery_queue", "recovery_consumer", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip := func(body string) {
		t.Helper()
		ctx := testContext(t)
		if err := ch.PublishWithContext(ctx, "recovery_exchange", "key", false, false, amqp.Publishing{Body: []byte(body)}); err != nil {
			t.Fatalf("publish %q: %v", body, err)
		}
		select {
		case d, ok := <-deliveries:
			if !ok || string(d.Body) != body {
				t.Fatalf("got %q (open %v), want %q", d.Body, ok, body)
			}
		case <-ctx.Done():
			t.Fatalf("%q not delivered", body)
		}
	}
	roundTrip("before")

	connState, chanState := make(chan *amqp.StateChanged, 10), make(chan *amqp.StateChanged, 10)
	conn.NotifyStateChange(connState)
	ch.NotifyStateChange(chanState)
	dropConnection(t, n, apiConnectionName(t, n, "recovery-publish"))
	for _, states := range []chan *amqp.StateChanged{connState, chanState} {
		reconnecting := false
		for open := false; !open; {
			select {
			case sc := <-states:
				reconnecting = reconnecting || sc.To == amqp.StateReconnecting
				open = reconnecting && sc.To == amqp.StateOpen
			case <-time.After(testTimeout):
				t.Fatalf("no recovery: reconnecting seen %v", reconnecting)
			}
		}
	}
	roundTrip("after")
	// A new connection took the old one's place under the same name.
	if name := apiConnectionName(t, n, "recovery-publish"); name == "" {
		t.Fatal("the recovered connection is not listed")
	}
}

// requireRabbitmqadmin fails the test when rabbitmqadmin is missing: the
// management API promises to work with it, so its test must not skip.
func requireRabbitmqadmin(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("rabbitmqadmin")
	if err != nil {
		t.Fatal("rabbitmqadmin not installed: apt-get install rabbitmq-server, which ships it " +
			"(the RabbitMQ service itself need not run; .ci/run installs it)")
	}
	return path
}

// rabbitmqadmin runs RabbitMQ's own CLI against n's management API.
func rabbitmqadmin(t *testing.T, n *node.Node, args ...string) string {
	t.Helper()
	host, port, _ := strings.Cut(n.HTTPAddr(), ":")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, requireRabbitmqadmin(t), append([]string{"-H", host, "-P", port, "-u", "guest", "-p", "guest"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rabbitmqadmin %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestRabbitmqadmin: RabbitMQ's rabbitmqadmin (Debian's rabbitmq-server)
// lists queues, exchanges, bindings and connections, declares and deletes
// a queue, publishes and gets a message, closes a connection, and exports
// and imports definitions, against Wharf.
func TestRabbitmqadmin(t *testing.T) {
	requireRabbitmqadmin(t)
	t.Parallel()
	n := startNode(t)
	conn := dialNamed(t, n, "admin-e2e", nil)
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))

	rabbitmqadmin(t, n, "declare", "queue", "name=orders", "durable=true")
	rabbitmqadmin(t, n, "declare", "exchange", "name=incoming", "type=topic")
	rabbitmqadmin(t, n, "declare", "binding", "source=incoming", "destination=orders", "routing_key=order.#")
	if out := rabbitmqadmin(t, n, "publish", "exchange=incoming", "routing_key=order.eu", "payload=hello from rabbitmqadmin"); !strings.Contains(out, "Message published") ||
		strings.Contains(out, "NOT routed") {
		t.Fatalf("publish: %s", out)
	}
	if out := rabbitmqadmin(t, n, "get", "queue=orders"); !strings.Contains(out, "hello from rabbitmqadmin") || !strings.Contains(out, "order.eu") {
		t.Fatalf("get: %s", out)
	}
	if out := rabbitmqadmin(t, n, "-q", "-f", "tsv", "list", "queues", "name", "messages"); out != "orders\t1\n" {
		t.Fatalf("list queues: %q", out)
	}
	if out := rabbitmqadmin(t, n, "-q", "-f", "tsv", "list", "exchanges", "name", "type"); !strings.Contains(out, "incoming\ttopic\n") ||
		!strings.Contains(out, "amq.direct\tdirect\n") {
		t.Fatalf("list exchanges: %q", out)
	}
	if out := rabbitmqadmin(t, n, "-q", "-f", "tsv", "list", "bindings", "source", "destination", "routing_key"); !strings.Contains(out, "\torders\torders\n") ||
		!strings.Contains(out, "incoming\torders\torder.#\n") {
		t.Fatalf("list bindings: %q", out)
	}
	if out := rabbitmqadmin(t, n, "list", "connections", "name", "user", "channels"); !strings.Contains(out, "| guest |") {
		t.Fatalf("list connections: %s", out)
	}
	if out := rabbitmqadmin(t, n, "show", "overview"); !strings.Contains(out, "queue_totals.messages") {
		t.Fatalf("show overview: %s", out)
	}

	defs := filepath.Join(t.TempDir(), "definitions.json")
	rabbitmqadmin(t, n, "export", defs)
	rabbitmqadmin(t, n, "delete", "queue", "name=orders")
	if out := rabbitmqadmin(t, n, "-q", "-f", "tsv", "list", "queues", "name"); out != "" {
		t.Fatalf("queues after delete: %q", out)
	}
	rabbitmqadmin(t, n, "import", defs)
	if out := rabbitmqadmin(t, n, "-q", "-f", "tsv", "list", "bindings", "source", "destination", "routing_key"); !strings.Contains(out, "incoming\torders\torder.#\n") {
		t.Fatalf("bindings after import: %q", out)
	}

	name := apiConnectionName(t, n, "admin-e2e")
	rabbitmqadmin(t, n, "close", "connection", "name="+name)
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp.ConnectionForced {
			t.Fatalf("close: %+v, want 320", e)
		}
	case <-time.After(testTimeout):
		t.Fatal("rabbitmqadmin close connection: the client was not told")
	}
}
