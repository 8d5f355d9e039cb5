package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// login is a management API user's name and password.
type login struct{ user, password string }

var guest = login{"guest", "guest"}

// apiCall sends method path, with body (JSON) and header's fields, to the
// node's management API as who, and returns the answer's status, header
// and body.
func (a apiNode) apiCall(ctx context.Context, who login, method, path, body string, header http.Header) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+a.http+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.SetBasicAuth(who.user, who.password)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data, err
}

// apiGet decodes GET path's answer, as who, into out, and returns the
// nodes its Wharf-Unanswered-Nodes header names.
func (a apiNode) apiGet(ctx context.Context, who login, path string, out any) (string, error) {
	code, h, data, err := a.apiCall(ctx, who, http.MethodGet, path, "", nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET %s as %s: %d %s", path, who.user, code, data)
	}
	if err != nil {
		return "", err
	}
	return h.Get("Wharf-Unanswered-Nodes"), json.Unmarshal(data, out)
}

// listedConnection is what /api/connections shows of a connection, and
// /api/channels of a channel (Channels is a connection's count).
type listedConnection struct {
	Name     string `json:"name"`
	Node     string `json:"node"`
	User     string `json:"user"`
	Channels int    `json:"channels"`
	Given    string `json:"user_provided_name"`
	Conn     struct {
		Name string `json:"name"`
	} `json:"connection_details"`
	Consumers int `json:"consumer_count"`
}

func (c listedConnection) String() string {
	if c.Conn.Name != "" { // a channel
		return fmt.Sprintf("%s on %s of %s, %d consumers", c.Name, c.Node, c.User, c.Consumers)
	}
	return fmt.Sprintf("%s (%s) on %s of %s, %d channels", c.Name, c.Given, c.Node, c.User, c.Channels)
}

// connectionName is the name of the client's connection, as the node
// it is connected to names it: "client -> node".
func connectionName(conn *amqp.Connection) string {
	return fmt.Sprintf("%s -> %s", conn.LocalAddr(), conn.RemoteAddr())
}

// dialNamed connects to addr as who, giving the connection a name, and
// retries while the node is starting or does not know who yet.
func dialNamed(ctx context.Context, t *testing.T, addr string, who login, name string) *amqp.Connection {
	t.Helper()
	var conn *amqp.Connection
	eventually(ctx, t, who.user+" logs in to "+addr, func() error {
		var err error
		conn, err = amqp.DialConfig("amqp://"+who.user+":"+who.password+"@"+addr+"/",
			amqp.Config{Properties: amqp.Table{"connection_name": name}})
		return err
	})
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestConnectionsOnEveryNode: three `wharf serve` processes; amqp091-go
// clients on nodes 1 and 2 (one of them carol's, a user with the
// management tag). Node 3, which has no client, lists both nodes'
// connections and channels, each with its node, in /api/connections,
// /api/vhosts/%2F/connections, /api/connections/{name}(/channels),
// /api/channels and /api/channels/{name}, as RabbitMQ does on any node,
// and counts them in /api/overview's object_totals; carol sees her own
// connection alone, there and in the totals. DELETE of node 2's
// connection on node 3 closes it on node 2: the client gets 320
// CONNECTION_FORCED with the X-Reason text. Node 1 killed -9: node 3
// names it in Wharf-Unanswered-Nodes, of a listing and of the totals.
func TestConnectionsOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startAPICluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	c1 := dialNamed(ctx, t, nodes[0].amqp, guest, "guest-on-node-1")
	ch1 := channel(t, c1)
	channel(t, c1)
	if _, err := ch1.QueueDeclare("orders", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch1.Consume("orders", "", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	carol := login{"carol", "carol-pass"}
	for _, put := range []struct{ path, body string }{
		{"/api/users/carol", `{"password":"carol-pass","tags":"management"}`},
		{"/api/permissions/%2F/carol", `{"configure":".*","write":".*","read":".*"}`},
	} {
		if code, _, data, err := nodes[2].apiCall(ctx, guest, http.MethodPut, put.path, put.body, nil); err != nil || code/100 != 2 {
			t.Fatalf("PUT %s: %d %s %v", put.path, code, data, err)
		}
	}
	c2 := dialNamed(ctx, t, nodes[1].amqp, carol, "carol-on-node-2")
	channel(t, c2)
	closed := c2.NotifyClose(make(chan *amqp.Error, 1))

	name1, name2 := connectionName(c1), connectionName(c2)
	conn1 := fmt.Sprintf("%s (guest-on-node-1) on wharf@1 of guest, 2 channels", name1)
	conn2 := fmt.Sprintf("%s (carol-on-node-2) on wharf@2 of carol, 1 channels", name2)
	chans1 := []string{
		fmt.Sprintf("%s (1) on wharf@1 of guest, 1 consumers", name1),
		fmt.Sprintf("%s (2) on wharf@1 of guest, 0 consumers", name1),
	}
	chans2 := []string{fmt.Sprintf("%s (1) on wharf@2 of carol, 0 consumers", name2)}
	// Listed by name, which starts with the client's address.
	conns, chans := []string{conn1, conn2}, append(slices.Clone(chans1), chans2...)
	slices.Sort(conns)
	slices.Sort(chans)
	shown := func(who login, path string) ([]string, error) {
		var cs []listedConnection
		unanswered, err := nodes[2].apiGet(ctx, who, path, &cs)
		if err == nil && unanswered != "" {
			err = fmt.Errorf("%s names %s unanswered", path, unanswered)
		}
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.String()
		}
		return out, err
	}
	// A node lists a connection once the client has its open-ok.
	eventually(ctx, t, "node 3 lists both connections", func() error {
		got, err := shown(guest, "/api/connections")
		if err == nil && !slices.Equal(got, conns) {
			err = fmt.Errorf("node 3 lists %q; want %q", got, conns)
		}
		return err
	})
	for path, want := range map[string][]string{
		"/api/vhosts/%2F/connections": conns,
		"/api/channels":               chans,
		"/api/vhosts/%2F/channels":    chans,
		"/api/connections/" + url.PathEscape(name1) + "/channels": chans1,
		"/api/connections/" + url.PathEscape(name2) + "/channels": chans2,
	} {
		if got, err := shown(guest, path); err != nil || !slices.Equal(got, want) {
			t.Fatalf("node 3's %s lists %q, %v; want %q", path, got, err, want)
		}
	}
	for path, want := range map[string]string{
		"/api/connections/" + url.PathEscape(name2):     conn2,
		"/api/channels/" + url.PathEscape(name1+" (2)"): chans1[1],
	} {
		var c listedConnection
		if _, err := nodes[2].apiGet(ctx, guest, path, &c); err != nil || c.String() != want {
			t.Fatalf("node 3's %s shows %q, %v; want %q", path, c, err, want)
		}
	}

	// carol sees her own connection alone, and counts it alone.
	if got, err := shown(carol, "/api/connections"); err != nil || !slices.Equal(got, []string{conn2}) {
		t.Fatalf("node 3 lists carol %q, %v", got, err)
	}
	if code, _, _, err := nodes[2].apiCall(ctx, carol, http.MethodGet, "/api/connections/"+url.PathEscape(name1), "", nil); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("carol's GET of guest's connection on node 1: %d, %v; want 401", code, err)
	}
	type totals struct {
		Objects struct {
			Connections, Channels, Consumers, Queues int
		} `json:"object_totals"`
	}
	for who, want := range map[login]string{guest: "{2 3 1 1}", carol: "{1 1 0 1}"} {
		var o totals
		if unanswered, err := nodes[2].apiGet(ctx, who, "/api/overview", &o); err != nil || fmt.Sprint(o.Objects) != want || unanswered != "" {
			t.Fatalf("node 3's object_totals for %s: %+v (unanswered %q), %v; want connections, channels, consumers, queues %s",
				who.user, o.Objects, unanswered, err, want)
		}
	}

	code, _, data, err := nodes[2].apiCall(ctx, guest, http.MethodDelete, "/api/connections/"+url.PathEscape(name2), "",
		http.Header{"X-Reason": {"moved by the test"}})
	if err != nil || code != http.StatusNoContent {
		t.Fatalf("DELETE of node 2's connection on node 3: %d %s, %v", code, data, err)
	}
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp.ConnectionForced || e.Reason != "CONNECTION_FORCED - moved by the test" {
			t.Fatalf("node 2's client closed with %+v; want 320 CONNECTION_FORCED - moved by the test", e)
		}
	case <-ctx.Done():
		t.Fatal("node 2's client was not closed")
	}
	eventually(ctx, t, "node 3 lists node 1's connection alone", func() error {
		got, err := shown(guest, "/api/connections")
		if err == nil && !slices.Equal(got, []string{conn1}) {
			err = errors.New(strings.Join(got, "; "))
		}
		return err
	})
	code, _, _, err = nodes[2].apiCall(ctx, guest, http.MethodDelete, "/api/connections/"+url.PathEscape(name2), "", nil)
	if err != nil || code != http.StatusNotFound {
		t.Fatalf("DELETE of the closed connection: %d, %v; want 404", code, err)
	}

	// Node 1 killed: node 3 names it, in the totals and in a listing, and
	// answers within about a second.
	nodes[0].kill()
	eventually(ctx, t, "node 3's overview names node 1 unanswered", func() error {
		var o totals
		start := time.Now()
		unanswered, err := nodes[2].apiGet(ctx, guest, "/api/overview", &o)
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Fatalf("/api/overview on node 3 took %v with node 1 dead", took)
		}
		if err == nil && (unanswered != wharfName(1) || fmt.Sprint(o.Objects) != "{0 0 0 1}") {
			err = fmt.Errorf("node 3 counts %+v, unanswered %q", o.Objects, unanswered)
		}
		return err
	})
	var cs []listedConnection
	if unanswered, err := nodes[2].apiGet(ctx, guest, "/api/connections", &cs); err != nil || len(cs) != 0 || unanswered != wharfName(1) {
		t.Fatalf("with node 1 dead node 3 lists %v, unanswered %q, %v", cs, unanswered, err)
	}
}
