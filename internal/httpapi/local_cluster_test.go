package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// twoNodes opens the registries of a cluster of two nodes that share no
// definitions (only their transient objects matter here: exclusive
// queues, which are recorded, are not among them) and reach each
// other with node calls, node 1 while up is set; it returns each node's
// API.
func twoNodes(t *testing.T, up *atomic.Bool) ([2]*httptest.Server, [2]*mq.Registry) {
	t.Helper()
	srvs, regs, _ := twoNodesOver(t, up, nil)
	return srvs, regs
}

// twoNodesOver is twoNodes over the definitions defs plays the metadata
// log of (nil: none shared); it returns each node's API configuration
// too, whose user and permission stores are the node's own.
func twoNodesOver(t *testing.T, up *atomic.Bool, defs *laggingDefs) ([2]*httptest.Server, [2]*mq.Registry, [2]Config) {
	t.Helper()
	var (
		mu       sync.Mutex
		handlers = map[int32]func(context.Context, int32, []byte) ([]byte, error){}
	)
	var srvs [2]*httptest.Server
	var regs [2]*mq.Registry
	var cfgs [2]Config
	for i := range 2 {
		id := int32(i + 1)
		cc := &mq.ClusterConfig{
			NodeID:  id,
			Watch:   func(func(string)) {},
			Get:     func(string) ([]byte, bool) { return nil, false },
			Barrier: func() error { return nil },
			Nodes:   func() []int32 { return []int32{1, 2} },
			PeerUp:  func(node int32) bool { return node != 1 || up.Load() },
			CallNode: func(ctx context.Context, to int32, data []byte) ([]byte, error) {
				mu.Lock()
				h := handlers[to]
				mu.Unlock()
				return h(ctx, id, data)
			},
			HandleCalls: func(fn func(context.Context, int32, []byte) ([]byte, error)) {
				mu.Lock()
				handlers[id] = fn
				mu.Unlock()
			},
		}
		var store mq.DefinitionStore = &memDefs{m: map[string][]byte{}}
		if defs != nil {
			store = defs.node(id, cc)
		}
		reg, err := mq.Open(mq.Config{DataDir: t.TempDir(), Definitions: store, Cluster: cc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		cfgs[i] = withUsers(t, Config{Version: "test"}, guestOnly)
		srvs[i] = httptest.NewServer(New(reg, cfgs[i]))
		t.Cleanup(srvs[i].Close)
		regs[i] = reg
	}
	return srvs, regs, cfgs
}

// withTransients is twoNodes, with node 1's transient queue "scratch"
// and transient topic exchange "events"; it returns node 1's vhost "/"
// too.
func withTransients(t *testing.T, up *atomic.Bool) ([2]*httptest.Server, *mq.VHost) {
	t.Helper()
	srvs, regs := twoNodes(t, up)
	v1, err := regs[0].VHost("/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v1.DeclareQueue(mq.QueueDef{Name: "scratch"}, false); err != nil {
		t.Fatal(err)
	}
	if err := v1.DeclareExchange(mq.ExchangeDef{Name: "events", Type: "topic"}, false); err != nil {
		t.Fatal(err)
	}
	return srvs, v1
}

// TestOtherNodesTransientObjects: node 2's API lists node 1's transient
// queue (with its node and figures) and transient exchange, shows each
// alone and counts them in the overview and the vhost's totals; with node 1 out of contact they
// are missing and node 1 is named in Wharf-Unanswered-Nodes.
func TestOtherNodesTransientObjects(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	srvs, _ := withTransients(t, &up)
	if code, body := call(t, srvs[0], http.MethodPost, "/api/exchanges/%2F/amq.default/publish",
		`{"routing_key":"scratch","payload":"m","payload_encoding":"string","properties":{}}`); code != http.StatusOK {
		t.Fatalf("publish on node 1: %d %s", code, body)
	}
	node2 := srvs[1]
	get := func(path string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, node2.URL+path, nil)
		req.SetBasicAuth("guest", "guest")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, string(body)
	}
	for path, want := range map[string]string{
		"/api/queues":               `"name":"scratch"`,
		"/api/queues/%2F":           `"node":"wharf@1"`,
		"/api/queues/%2F/scratch":   `"durable":false`,
		"/api/exchanges":            `"name":"events"`,
		"/api/exchanges/%2F/events": `"type":"topic"`,
		"/api/overview":             `"queues":1`,
		"/api/vhosts/%2F":           `"messages":1`,
	} {
		if code, h, body := get(path); code != http.StatusOK || !strings.Contains(body, want) || h.Get(unansweredHeader) != "" {
			t.Errorf("GET %s on node 2: %d %s, unanswered %q; want %s", path, code, body, h.Get(unansweredHeader), want)
		}
	}
	if _, _, body := get("/api/queues/%2F/scratch"); !strings.Contains(body, `"messages_ready":1`) {
		t.Errorf("node 1's queue shown without its figures: %s", body)
	}

	up.Store(false)
	for path, missing := range map[string]string{
		"/api/queues":     `"name":"scratch"`,
		"/api/exchanges":  `"name":"events"`,
		"/api/overview":   `"queues":1`,
		"/api/vhosts/%2F": `"messages":1`,
	} {
		if code, h, body := get(path); code != http.StatusOK || strings.Contains(body, missing) || h.Get(unansweredHeader) != "wharf@1" {
			t.Errorf("GET %s on node 2 with node 1 out of contact: %d %s, unanswered %q", path, code, body, h.Get(unansweredHeader))
		}
	}
	for _, path := range []string{"/api/queues/%2F/scratch", "/api/exchanges/%2F/events"} {
		if code, h, _ := get(path); code != http.StatusNotFound || h.Get(unansweredHeader) != "wharf@1" {
			t.Errorf("GET %s on node 2 with node 1 out of contact: %d, unanswered %q; want 404 naming wharf@1", path, code, h.Get(unansweredHeader))
		}
	}
}

// TestOtherNodesTransientBindings: node 2's API lists the bindings only
// node 1 has (to its transient queue, from its transient exchange, and
// the default exchange's to that queue) in /api/bindings, per vhost, per
// queue, per source exchange and between two names; with node 1 out of
// contact they are missing, node 1 is named in Wharf-Unanswered-Nodes,
// and node 1's queue's and exchange's bindings are 404.
func TestOtherNodesTransientBindings(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	srvs, v1 := withTransients(t, &up)
	for _, bind := range []func() error{
		func() error { return v1.BindQueue("scratch", "events", "k.#", nil, 0) },
		func() error { return v1.BindQueue("scratch", "amq.direct", "d", nil, 0) }, // a durable exchange's, not recorded
		func() error { return v1.BindExchange("amq.fanout", "events", "f", nil) },
	} {
		if err := bind(); err != nil {
			t.Fatal(err)
		}
	}
	// source→destination:key of each binding node 2 shows (its own
	// vhost has none but the default exchange's, to no queue).
	list := func(path string) (int, string, []string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srvs[1].URL+path, nil)
		req.SetBasicAuth("guest", "guest")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var bs []struct {
			Source, Destination string
			Key                 string `json:"routing_key"`
			Kind                string `json:"destination_type"`
		}
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&bs); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
		var got []string
		for _, b := range bs {
			got = append(got, fmt.Sprintf("%s→%s %s:%s", b.Source, b.Kind, b.Destination, b.Key))
		}
		return resp.StatusCode, resp.Header.Get(unansweredHeader), got
	}
	all := []string{"→queue scratch:scratch", "amq.direct→queue scratch:d", "events→exchange amq.fanout:f", "events→queue scratch:k.#"}
	for path, want := range map[string][]string{
		"/api/bindings":                             all,
		"/api/bindings/%2F":                         all,
		"/api/queues/%2F/scratch/bindings":          {"→queue scratch:scratch", "amq.direct→queue scratch:d", "events→queue scratch:k.#"},
		"/api/exchanges/%2F/events/bindings/source": {"events→exchange amq.fanout:f", "events→queue scratch:k.#"},
		"/api/bindings/%2F/e/events/q/scratch":      {"events→queue scratch:k.#"},
	} {
		if code, unanswered, got := list(path); code != http.StatusOK || !slices.Equal(got, want) || unanswered != "" {
			t.Errorf("GET %s on node 2: %d %q, unanswered %q; want %q", path, code, got, unanswered, want)
		}
	}

	up.Store(false)
	for _, path := range []string{"/api/bindings", "/api/bindings/%2F"} {
		if code, unanswered, got := list(path); code != http.StatusOK || len(got) != 0 || unanswered != "wharf@1" {
			t.Errorf("GET %s on node 2 with node 1 out of contact: %d %q, unanswered %q", path, code, got, unanswered)
		}
	}
	for _, path := range []string{"/api/queues/%2F/scratch/bindings", "/api/exchanges/%2F/events/bindings/source"} {
		if code, unanswered, _ := list(path); code != http.StatusNotFound || unanswered != "wharf@1" {
			t.Errorf("GET %s on node 2 with node 1 out of contact: %d, unanswered %q; want 404 naming wharf@1", path, code, unanswered)
		}
	}
}

// TestOtherNodesBindingByPath: node 2's API shows and deletes, by its
// full path, a binding only node 1 has (to its transient queue, from its
// transient exchange, to a queue and to an exchange), as RabbitMQ's does
// on any node; the delete is node 1's (a second one is 404). With node 1
// out of contact such a binding is 404, node 1 named in
// Wharf-Unanswered-Nodes.
func TestOtherNodesBindingByPath(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	srvs, v1 := withTransients(t, &up)
	for _, bind := range []func() error{
		func() error { return v1.BindQueue("scratch", "events", "k.#", nil, 0) },
		func() error { return v1.BindQueue("scratch", "amq.direct", "d", nil, 0) },
		func() error { return v1.BindExchange("amq.fanout", "events", "f", amqpwire.Table{"x": "y"}) },
	} {
		if err := bind(); err != nil {
			t.Fatal(err)
		}
	}
	node2 := srvs[1]
	toQueue, toExchange := "/api/bindings/%2F/e/events/q/scratch/k.%2523", "/api/bindings/%2F/e/events/e/amq.fanout/"
	if code, body := call(t, node2, http.MethodGet, "/api/bindings/%2F/e/events/e/amq.fanout", ""); code != http.StatusOK {
		t.Fatalf("GET the bindings between events and amq.fanout on node 2: %d %s", code, body)
	} else {
		var bs []map[string]any
		if err := json.Unmarshal([]byte(body), &bs); err != nil || len(bs) != 1 {
			t.Fatalf("GET the bindings between events and amq.fanout on node 2: %s", body)
		}
		toExchange += bs[0]["properties_key"].(string) // "f~" and a hash in base64url: nothing to escape
	}
	for path, want := range map[string][]string{
		toQueue:    {`"destination_type":"queue"`, `"routing_key":"k.#"`},
		toExchange: {`"destination_type":"exchange"`, `"routing_key":"f"`, `"arguments":{"x":"y"}`},
	} {
		code, body := call(t, node2, http.MethodGet, path, "")
		missing := slices.DeleteFunc(want, func(w string) bool { return strings.Contains(body, w) })
		if code != http.StatusOK || len(missing) > 0 {
			t.Errorf("GET %s on node 2: %d %s; missing %s", path, code, body, missing)
		}
	}
	for _, path := range []string{toQueue, toExchange} {
		for _, want := range []int{http.StatusNoContent, http.StatusNotFound} {
			if code, body := call(t, node2, http.MethodDelete, path, ""); code != want {
				t.Errorf("DELETE %s on node 2: %d %s; want %d", path, code, body, want)
			}
		}
	}
	if left := v1.Bindings(); len(left) != 1 || left[0].Source != "amq.direct" {
		t.Fatalf("node 1 keeps the bindings %+v, want only amq.direct's", left)
	}

	up.Store(false)
	req, _ := http.NewRequest(http.MethodDelete, node2.URL+"/api/bindings/%2F/e/amq.direct/q/scratch/d", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get(unansweredHeader) != "wharf@1" {
		t.Errorf("DELETE of node 1's binding with node 1 out of contact: %d, unanswered %q; want 404 naming wharf@1",
			resp.StatusCode, resp.Header.Get(unansweredHeader))
	}
	if left := v1.Bindings(); len(left) != 1 {
		t.Fatalf("node 1 keeps the bindings %+v", left)
	}
}
