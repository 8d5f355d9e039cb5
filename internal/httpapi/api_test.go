package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// These tests drive the API of a whole node over HTTP, with amqp091-go as
// the AMQP client whose connections it shows.

const waitLimit = 10 * time.Second

type api struct {
	t    *testing.T
	base string
}

func newAPI(t *testing.T, opts ...nodetest.Option) (*api, *node.Node) {
	t.Helper()
	n := nodetest.Start(t, opts...)
	return &api{t: t, base: nodetest.HTTPURL(n)}, n
}

// do sends one request as guest (a JSON body unless body is "") and
// returns the status, the body and the headers.
func (a *api) do(method, path, body string, header ...string) (int, string, http.Header) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// want does a request that must answer status, and returns the body.
func (a *api) want(status int, method, path, body string) string {
	a.t.Helper()
	code, got, _ := a.do(method, path, body)
	if code != status {
		a.t.Fatalf("%s %s: %d %s, want %d", method, path, code, got, status)
	}
	return got
}

// get is a GET that must succeed, decoded.
func get[T any](a *api, path string) T {
	a.t.Helper()
	var v T
	body := a.want(200, "GET", path, "")
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		a.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
	return v
}

type obj = map[string]any

type nodeConfig = node.Config

// num reads a number at a dotted path of o, -1 if there is none.
func num(o obj, path string) float64 {
	var v any = o
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(obj)
		if !ok {
			return -1
		}
		v = m[k]
	}
	if f, ok := v.(float64); ok {
		return f
	}
	return -1
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dial(t *testing.T, n *node.Node, connectionName string) *amqp.Connection {
	t.Helper()
	props := amqp.NewConnectionProperties()
	if connectionName != "" {
		props.SetClientConnectionName(connectionName)
	}
	conn, err := amqp.DialConfig(nodetest.AMQPURL(n), amqp.Config{Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func channel(t *testing.T, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func publish(t *testing.T, ch *amqp.Channel, exchange, key, body string) {
	t.Helper()
	if err := ch.PublishWithContext(context.Background(), exchange, key, false, false, amqp.Publishing{Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

// listedConnection is what amqp091-go's tests and this one read of a
// connection.
type listedConnection struct {
	Name             string `json:"name"`
	ClientProperties struct {
		ConnectionName string `json:"connection_name"`
	} `json:"client_properties"`
	UserProvidedName string `json:"user_provided_name"`
	User             string `json:"user"`
	VHost            string `json:"vhost"`
	Channels         int    `json:"channels"`
	PeerHost         string `json:"peer_host"`
}

// TestConnectionsAsAmqp091GoFindsThem does what amqp091-go's own
// connection-recovery tests do: find the connection by its
// connection_name in GET /api/connections/ and drop it with DELETE
// /api/connections/{name}. The client must get 320 CONNECTION_FORCED and
// its unacknowledged message must go back to the queue.
func TestConnectionsAsAmqp091GoFindsThem(t *testing.T) {
	a, n := newAPI(t)
	conn := dial(t, n, "recovery-test")
	ch := channel(t, conn)
	if _, err := ch.QueueDeclare("work", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", "work", "m1")
	deliveries, err := ch.Consume("work", "ctag-1", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-deliveries // left unacknowledged

	conns := get[[]listedConnection](a, "/api/connections/") // with the trailing slash amqp091-go uses
	if len(conns) != 1 {
		t.Fatalf("connections: %+v", conns)
	}
	c := conns[0]
	if c.ClientProperties.ConnectionName != "recovery-test" || c.UserProvidedName != "recovery-test" || c.User != "guest" ||
		c.VHost != "/" || c.Channels != 1 || c.PeerHost != "127.0.0.1" || !strings.HasSuffix(c.Name, " -> "+n.AMQPAddr()) {
		t.Fatalf("connection: %+v", c)
	}
	one := get[obj](a, "/api/connections/"+url.PathEscape(c.Name))
	if one["name"] != c.Name || one["protocol"] != "AMQP 0-9-1" || one["state"] != "running" {
		t.Fatalf("GET one connection: %v", one)
	}

	chans := get[[]obj](a, "/api/channels")
	if len(chans) != 1 || chans[0]["name"] != c.Name+" (1)" || num(chans[0], "consumer_count") != 1 ||
		num(chans[0], "messages_unacknowledged") != 1 || num(chans[0], "message_stats.publish") != 1 ||
		num(chans[0], "message_stats.deliver") != 1 {
		t.Fatalf("channels: %v", chans)
	}
	consumers := get[[]obj](a, "/api/consumers/%2F")
	if len(consumers) != 1 || consumers[0]["consumer_tag"] != "ctag-1" || consumers[0]["ack_required"] != true ||
		consumers[0]["queue"].(obj)["name"] != "work" || consumers[0]["channel_details"].(obj)["connection_name"] != c.Name {
		t.Fatalf("consumers: %v", consumers)
	}
	q := get[obj](a, "/api/queues/%2F/work")
	if details, _ := q["consumer_details"].([]any); len(details) != 1 {
		t.Fatalf("queue consumer_details: %v", q["consumer_details"])
	}

	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	a.want(204, "DELETE", "/api/connections/"+url.PathEscape(c.Name), "")
	select {
	case e := <-closed:
		if e == nil || e.Code != 320 || e.Reason != "CONNECTION_FORCED - Closed via management plugin" || !e.Server {
			t.Fatalf("client saw %+v, want 320 CONNECTION_FORCED", e)
		}
	case <-time.After(waitLimit):
		t.Fatal("the client was not told its connection was closed")
	}
	waitUntil(t, "the delivery back in the queue", func() bool {
		return num(get[obj](a, "/api/queues/%2F/work"), "messages_ready") == 1
	})
	waitUntil(t, "the connection gone", func() bool { return len(get[[]obj](a, "/api/connections")) == 0 })
	a.want(404, "DELETE", "/api/connections/"+url.PathEscape(c.Name), "")
}

// TestCloseConnectionReason: X-Reason becomes the close text.
func TestCloseConnectionReason(t *testing.T) {
	a, n := newAPI(t)
	conn := dial(t, n, "")
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	// The client has its open-ok before the server lists the connection.
	var conns []obj
	waitUntil(t, "the connection is listed", func() bool {
		conns = get[[]obj](a, "/api/connections")
		return len(conns) == 1
	})
	code, body, _ := a.do("DELETE", "/api/connections/"+url.PathEscape(conns[0]["name"].(string)), "", "X-Reason", "maintenance")
	if code != 204 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	select {
	case e := <-closed:
		if e == nil || e.Reason != "CONNECTION_FORCED - maintenance" {
			t.Fatalf("close: %+v", e)
		}
	case <-time.After(waitLimit):
		t.Fatalf("the client was not closed within %v", waitLimit)
	}
}
