package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/kafkaview"
	"github.com/wharf-mq/wharf/internal/kvtest"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/users"
)

// laggingDefs plays the metadata log of a cluster of two nodes
// (twoNodesOver): a write, wherever made, is live at once (Get) and node
// 1 applies it at once, but node 2 only when it catches up, at its next
// barrier or its own next write (a node applies the log up to its write
// before the write returns), as a node that lags does. What node 1
// declares is thus never on node 2 before node 2 looks for it and
// misses: a lookup that does not catch up answers 404, every time.
type laggingDefs struct {
	mu       sync.Mutex // serialises writes, which every node applies in that order
	live     map[string][]byte
	watchers map[int32]func(key string)
	held     []string     // the keys node 2 has yet to apply
	barriers atomic.Int64 // node 2's
}

func newLaggingDefs() *laggingDefs {
	return &laggingDefs{live: map[string][]byte{}, watchers: map[int32]func(string){}}
}

// node wires cc, node id's view of the cluster, to d and returns the
// node's definition store.
func (d *laggingDefs) node(id int32, cc *mq.ClusterConfig) mq.DefinitionStore {
	cc.Watch = func(fn func(string)) {
		d.mu.Lock()
		d.watchers[id] = fn
		d.mu.Unlock()
	}
	cc.Get = func(key string) ([]byte, bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		v, ok := d.live[key]
		return slices.Clone(v), ok
	}
	cc.PutIf = func(key string, value, prev []byte) error {
		return d.write(id, key, value, func(live []byte, ok bool) bool {
			if prev == nil {
				return !ok
			}
			return ok && bytes.Equal(live, prev)
		})
	}
	cc.Barrier = func() error {
		if id == 2 {
			d.barriers.Add(1)
			d.mu.Lock()
			d.catchUpLocked()
			d.mu.Unlock()
		}
		return nil
	}
	return laggingNode{d: d, id: id}
}

// write applies node by's write of key (value nil: a deletion) if
// applies, given key's live value, holds; else every node ignores it.
func (d *laggingDefs) write(by int32, key string, value []byte, applies func(live []byte, ok bool) bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if live, ok := d.live[key]; applies(live, ok) {
		if value == nil {
			delete(d.live, key)
		} else {
			d.live[key] = slices.Clone(value)
		}
		if fn := d.watchers[1]; fn != nil {
			fn(key)
		}
		d.held = append(d.held, key)
	}
	if by == 2 {
		d.catchUpLocked()
	}
	return nil
}

// catchUpLocked has node 2 apply the keys held for it. Those written
// before it watched are in what it loaded.
func (d *laggingDefs) catchUpLocked() {
	if fn := d.watchers[2]; fn != nil {
		for _, key := range d.held {
			fn(key)
		}
	}
	d.held = nil
}

// lags reports whether node 2 has writes yet to apply.
func (d *laggingDefs) lags() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.held) > 0
}

// laggingNode is one node's definition store over a laggingDefs.
type laggingNode struct {
	d  *laggingDefs
	id int32
}

func always([]byte, bool) bool { return true }

func (n laggingNode) Put(key string, value []byte) error { return n.d.write(n.id, key, value, always) }
func (n laggingNode) Delete(key string) error            { return n.d.write(n.id, key, nil, always) }

func (n laggingNode) Load(fn func(key string, value []byte) error) error {
	n.d.mu.Lock()
	snap := maps.Clone(n.d.live)
	n.d.mu.Unlock()
	for _, key := range slices.Sorted(maps.Keys(snap)) {
		if err := fn(key, snap[key]); err != nil {
			return err
		}
	}
	return nil
}

// laggingPair opens two nodes over one laggingDefs: node 2 applies what
// node 1 declares only once it catches up.
func laggingPair(t *testing.T) ([2]*httptest.Server, [2]Config, *laggingDefs) {
	t.Helper()
	var up atomic.Bool
	up.Store(true)
	defs := newLaggingDefs()
	srvs, _, cfgs := twoNodesOver(t, &up, defs)
	return srvs, cfgs, defs
}

// TestLaggingNodeFindsDefinitions: a vhost, a durable exchange, a durable
// queue and a policy made through node 1's API are shown, used and
// deleted at once through node 2's, which has not applied them yet (it
// catches up on the miss), as any node of RabbitMQ's cluster does; the
// vhost PUT again there is 204 (there already); a name that exists
// nowhere is still RabbitMQ's 404; and a lookup that hits runs no
// barrier.
func TestLaggingNodeFindsDefinitions(t *testing.T) {
	srvs, _, defs := laggingPair(t)
	node1, node2 := srvs[0], srvs[1]
	for _, c := range []struct {
		declare      string // method, path and body, on node 1
		method, path string // on node 2, at once
		body         string
		want         int
		shows        []string
	}{
		{`PUT /api/exchanges/%2F/orders {"type":"topic","durable":true}`,
			"GET", "/api/exchanges/%2F/orders", "", http.StatusOK, []string{`"name":"orders"`, `"type":"topic"`, `"durable":true`}},
		{`PUT /api/queues/%2F/billing {"durable":true}`,
			"GET", "/api/queues/%2F/billing", "", http.StatusOK, []string{`"name":"billing"`, `"durable":true`, `"node":"wharf@1"`}},
		{`PUT /api/policies/%2F/short {"pattern":"^short","definition":{"max-length":1}}`,
			"GET", "/api/policies/%2F/short", "", http.StatusOK, []string{`"name":"short"`, `"pattern":"^short"`}},
		{`PUT /api/vhosts/fresh`,
			"GET", "/api/vhosts/fresh", "", http.StatusOK, []string{`"name":"fresh"`}},
		{`PUT /api/exchanges/%2F/audit {"type":"fanout","durable":true}`,
			"GET", "/api/exchanges/%2F/audit/bindings/source", "", http.StatusOK, []string{`[]`}},
		{`PUT /api/queues/%2F/ledger {"durable":true}`,
			"GET", "/api/queues/%2F/ledger/bindings", "", http.StatusOK, []string{`"destination":"ledger"`}},
		{`PUT /api/vhosts/twice`,
			"PUT", "/api/vhosts/twice", "", http.StatusNoContent, nil},
		{`PUT /api/vhosts/spare`,
			"PUT", "/api/policies/spare/all", `{"pattern":".*","definition":{"max-length":5}}`, http.StatusCreated, nil},
		{`PUT /api/exchanges/%2F/doomed {"type":"direct","durable":true}`,
			"DELETE", "/api/exchanges/%2F/doomed", "", http.StatusNoContent, nil},
		{`PUT /api/queues/%2F/doomed {"durable":true}`,
			"DELETE", "/api/queues/%2F/doomed", "", http.StatusNoContent, nil},
		{`PUT /api/policies/%2F/doomed {"pattern":"^doomed","definition":{"max-length":1}}`,
			"DELETE", "/api/policies/%2F/doomed", "", http.StatusNoContent, nil},
		{`PUT /api/vhosts/doomed`,
			"DELETE", "/api/vhosts/doomed", "", http.StatusNoContent, nil},
	} {
		method, rest, _ := strings.Cut(c.declare, " ")
		path, body, _ := strings.Cut(rest, " ")
		if code, got := callAs(t, node1, method, path, "application/json", body); code != http.StatusCreated {
			t.Fatalf("%s on node 1: %d %s", c.declare, code, got)
		}
		if !defs.lags() {
			t.Fatalf("node 2 applied %s before it was asked for %s", c.declare, c.path)
		}
		code, got := callAs(t, node2, c.method, c.path, "application/json", c.body)
		missing := slices.DeleteFunc(slices.Clone(c.shows), func(s string) bool { return strings.Contains(got, s) })
		if code != c.want || len(missing) > 0 {
			t.Errorf("%s %s on node 2 right after %s on node 1: %d %s; want %d with %q", c.method, c.path, c.declare, code, got, c.want, missing)
		}
	}
	for _, path := range []string{"/api/exchanges/%2F/doomed", "/api/queues/%2F/doomed", "/api/policies/%2F/doomed", "/api/vhosts/doomed"} {
		if code, got := call(t, node1, http.MethodGet, path, ""); code != http.StatusNotFound {
			t.Errorf("GET %s on node 1 after node 2 deleted it: %d %s", path, code, got)
		}
	}

	for _, req := range []string{"GET /api/exchanges/%2F/nowhere", "GET /api/queues/%2F/nowhere", "GET /api/policies/%2F/nowhere",
		"GET /api/vhosts/nowhere", "GET /api/queues/%2F/nowhere/bindings", "GET /api/exchanges/%2F/nowhere/bindings/source",
		"DELETE /api/exchanges/%2F/nowhere", "DELETE /api/queues/%2F/nowhere", "DELETE /api/policies/%2F/nowhere",
		"DELETE /api/vhosts/nowhere"} {
		method, path, _ := strings.Cut(req, " ")
		code, got := call(t, node2, method, path, "")
		var body map[string]string
		if err := json.Unmarshal([]byte(got), &body); err != nil || code != http.StatusNotFound ||
			body["error"] != "Object Not Found" || body["reason"] != "Not Found" {
			t.Errorf("%s on node 2 of what exists nowhere: %d %s; want RabbitMQ's 404", req, code, got)
		}
	}

	before := defs.barriers.Load()
	for _, path := range []string{"/api/exchanges/%2F/orders", "/api/queues/%2F/billing", "/api/policies/%2F/short", "/api/vhosts/fresh"} {
		if code, got := call(t, node2, http.MethodGet, path, ""); code != http.StatusOK {
			t.Errorf("GET %s on node 2 again: %d %s", path, code, got)
		}
	}
	if n := defs.barriers.Load() - before; n != 0 {
		t.Errorf("GETs of what node 2 has ran %d barriers, want none", n)
	}
}

// TestLaggingNodeChecksVHostAccess: a user without a permission in a
// vhost made on node 1 just now gets node 2's 404 for its objects, as
// for any vhost it may not use, though node 2 had not applied the vhost
// when asked: authorisation catches up as the handler does.
func TestLaggingNodeChecksVHostAccess(t *testing.T) {
	srvs, cfgs, defs := laggingPair(t)
	if err := cfgs[1].Users.Put("watcher", "watcher", []string{users.TagManagement}); err != nil {
		t.Fatal(err)
	}
	if err := cfgs[1].Access.GrantAll("watcher", mq.DefaultVHost); err != nil {
		t.Fatal(err)
	}
	if code, got := callAs(t, srvs[0], http.MethodPut, "/api/vhosts/private", "application/json", ""); code != http.StatusCreated {
		t.Fatalf("PUT /api/vhosts/private on node 1: %d %s", code, got)
	}
	if !defs.lags() {
		t.Fatal("node 2 applied the vhost before it was asked for it")
	}
	if code, got := request(t, srvs[1], "watcher", "watcher", http.MethodGet, "/api/queues/private", "", ""); code != http.StatusNotFound {
		t.Errorf("GET /api/queues/private on node 2 as a user without a permission there: %d %s, want 404", code, got)
	}
	if code, got := call(t, srvs[1], http.MethodGet, "/api/queues/private", ""); code != http.StatusOK {
		t.Errorf("GET /api/queues/private on node 2 as an administrator: %d %s", code, got)
	}
}

// laggingTopics is the Kafka side of a node that has not applied the
// topic "orders" another node created just now: it finds it only once it
// catches up. "local" it has; "nowhere" exists nowhere.
type laggingTopics struct {
	KafkaView // nil: what the test does not call
	caughtUp  atomic.Bool
	catchUps  atomic.Int64
	produced  atomic.Int64
}

func (k *laggingTopics) known(name string) error {
	if name == "local" || name == "orders" && k.caughtUp.Load() {
		return nil
	}
	return fmt.Errorf("%w: no topic %q", kafkaview.ErrNotFound, name)
}

func (k *laggingTopics) Topic(name string) (kafkaview.TopicDetail, error) {
	return kafkaview.TopicDetail{TopicSummary: kafkaview.TopicSummary{Name: name, Partitions: 1}}, k.known(name)
}

func (k *laggingTopics) Browse(req kafkaview.BrowseRequest) (kafkaview.BrowseResult, error) {
	return kafkaview.BrowseResult{Records: []kafkaview.Record{}}, k.known(req.Topic)
}

func (k *laggingTopics) Produce(topic string, _ kafkaview.ProduceRequest) (kafkaview.ProduceResult, error) {
	if err := k.known(topic); err != nil {
		return kafkaview.ProduceResult{}, err
	}
	return kafkaview.ProduceResult{Offset: k.produced.Add(1) - 1}, nil
}

func (k *laggingTopics) CatchUp(context.Context) bool {
	k.catchUps.Add(1)
	k.caughtUp.Store(true)
	return true
}

// TestLaggingNodeFindsTopic: a Kafka topic created through another node
// just now, which this node has not applied, is shown, browsed and
// produced to at once through this node's API (it catches up on the
// miss); a topic that exists nowhere is still 404; a topic this node has
// costs no catch-up.
func TestLaggingNodeFindsTopic(t *testing.T) {
	for _, c := range []struct{ method, path, body, shows string }{
		{"GET", "/api/kafka/topics/orders", "", `"name":"orders"`},
		{"GET", "/api/kafka/topics/orders/partitions/0/records", "", `"records":[]`},
		{"POST", "/api/kafka/topics/orders/records", `{"value":"v"}`, `"offset":0`},
	} {
		view := &laggingTopics{}
		s := New(newRegistry(t), withUsers(t, Config{Version: "test"}, guestOnly))
		s.ServeKafka(view)
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		if code, got := call(t, srv, c.method, c.path, c.body); code != http.StatusOK || !strings.Contains(got, c.shows) {
			t.Errorf("%s %s on a node behind the topic's creation: %d %s, want %s", c.method, c.path, code, got, c.shows)
		}
		if n := view.produced.Load(); n > 1 {
			t.Errorf("%s %s produced %d records, want at most one", c.method, c.path, n)
		}

		nowhere := strings.Replace(c.path, "orders", "nowhere", 1)
		if code, got := call(t, srv, c.method, nowhere, c.body); code != http.StatusNotFound {
			t.Errorf("%s %s: %d %s, want 404", c.method, nowhere, code, got)
		}
		before := view.catchUps.Load()
		local := strings.Replace(c.path, "orders", "local", 1)
		if code, got := call(t, srv, c.method, local, c.body); code != http.StatusOK {
			t.Errorf("%s %s: %d %s", c.method, local, code, got)
		}
		if n := view.catchUps.Load() - before; n != 0 {
			t.Errorf("%s %s of a topic the node has caught up %d times, want none", c.method, local, n)
		}
	}
}

// TestMissCostsOneBarrier: a request that misses runs one barrier (a
// write to the metadata log) at most, however many of its lookups miss
// (the user's vhost check and the handler's, the vhost and the object):
// the first one to catch up did so after the request came, for them all.
// A request that is not authenticated, or by a user without a
// management tag, runs none: a flood of 404s costs a login each.
func TestMissCostsOneBarrier(t *testing.T) {
	srvs, cfgs, defs := laggingPair(t)
	if err := cfgs[1].Users.Put("watcher", "watcher", []string{users.TagManagement}); err != nil {
		t.Fatal(err)
	}
	if err := cfgs[1].Access.GrantAll("watcher", mq.DefaultVHost); err != nil {
		t.Fatal(err)
	}
	if err := cfgs[1].Users.Put("app", "app", nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, password, path string
		code                 int
		barriers             int64
	}{
		{"watcher", "wrong", "/api/queues/nowhere", http.StatusUnauthorized, 0},
		{"app", "app", "/api/queues/nowhere", http.StatusUnauthorized, 0},
		{"watcher", "watcher", "/api/queues/nowhere", http.StatusNotFound, 1},
		{"watcher", "watcher", "/api/exchanges/nowhere/x", http.StatusNotFound, 1},
		{"guest", "guest", "/api/exchanges/nowhere/x", http.StatusNotFound, 1},
		{"guest", "guest", "/api/exchanges/%2F/nowhere", http.StatusNotFound, 1},
		{"guest", "guest", "/api/policies/nowhere/p", http.StatusNotFound, 1},
	} {
		before := defs.barriers.Load()
		if code, got := request(t, srvs[1], tc.user, tc.password, http.MethodGet, tc.path, "", ""); code != tc.code {
			t.Errorf("GET %s as %s: %d %s, want %d", tc.path, tc.user, code, got, tc.code)
		}
		if n := defs.barriers.Load() - before; n != tc.barriers {
			t.Errorf("GET %s as %s ran %d barriers, want %d", tc.path, tc.user, n, tc.barriers)
		}
	}
}

// cutOffKV is the users' and permissions' metadata log on a node cut
// off from its quorum: a barrier (the catch-up of a lookup that misses)
// waits until its caller's context ends, or for the metadata write
// timeout, as the broker's does there. It counts the barriers under way.
type cutOffKV struct {
	*kvtest.Mem
	waiting atomic.Int64
}

func (kv *cutOffKV) BarrierContext(ctx context.Context) error {
	kv.waiting.Add(1)
	defer kv.waiting.Add(-1)
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(30 * time.Second):
		return errors.New("metadata write timed out")
	}
}

// cutOffRegistry is the registry of a node of two cut off from the
// metadata quorum: its barriers wait until the test ends.
func cutOffRegistry(t *testing.T) *mq.Registry {
	t.Helper()
	released := make(chan struct{})
	cc := &mq.ClusterConfig{
		NodeID:  1,
		Watch:   func(func(string)) {},
		Get:     func(string) ([]byte, bool) { return nil, false },
		Barrier: func() error { <-released; return errors.New("metadata write timed out") },
		Nodes:   func() []int32 { return []int32{1, 2} },
		PeerUp:  func(int32) bool { return false },
		CallNode: func(context.Context, int32, []byte) ([]byte, error) {
			return nil, errors.New("node 2 is out of contact")
		},
		HandleCalls: func(func(context.Context, int32, []byte) ([]byte, error)) {},
	}
	reg, err := mq.Open(mq.Config{DataDir: t.TempDir(), Definitions: &memDefs{m: map[string][]byte{}}, Cluster: cc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	t.Cleanup(func() { close(released) }) // first: Close waits for the barrier under way
	return reg
}

// cutOffAPI serves the API of a node whose users and permissions are
// cut off from the metadata quorum, with lookups bound by wait: guest
// (administrator), watcher (management) and pol (policymaker), neither
// with a permission anywhere.
func cutOffAPI(t *testing.T, wait time.Duration) (*httptest.Server, *cutOffKV) {
	t.Helper()
	kv := &cutOffKV{Mem: kvtest.New()}
	cfg := withStoresOver(t, Config{Version: "test"}, kv)
	for name, tag := range map[string]string{"guest": users.TagAdministrator, "watcher": users.TagManagement, "pol": users.TagPolicymaker} {
		if err := cfg.Users.Put(name, name, []string{tag}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cfg.Access.GrantAll("guest", mq.DefaultVHost); err != nil {
		t.Fatal(err)
	}
	s := New(cutOffRegistry(t), cfg)
	s.lookupWait = wait
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, kv
}

// TestCutOffNodeAnswersInTime: on a node cut off from the metadata
// quorum, a login that misses (an unknown user, a wrong password), a
// permission check that misses (a vhost the user has no permission in)
// and a lookup of a name that exists nowhere answer 401, 404 or the
// listing without the vhost once the lookup's bound runs out, not when
// the catch-up gives up (30 s); a client that goes away ends the wait of
// a login or a permission check at once.
func TestCutOffNodeAnswersInTime(t *testing.T) {
	const wait = 300 * time.Millisecond
	srv, _ := cutOffAPI(t, wait)
	for _, c := range []struct {
		user, path string
		code       int
		body       string
	}{
		{"nobody", "/api/overview", http.StatusUnauthorized, "Login failed"},
		{"watcher", "/api/queues/%2F", http.StatusNotFound, "Not Found"},
		{"pol", "/api/policies/%2F", http.StatusNotFound, "Not Found"},
		{"watcher", "/api/vhosts", http.StatusOK, "[]"},
		{"watcher", "/api/queues", http.StatusOK, "[]"},
		{"guest", "/api/exchanges/%2F/nowhere", http.StatusNotFound, "Not Found"},
		{"guest", "/api/bindings/%2F/e/amq.direct/q/nowhere/~", http.StatusNotFound, "Not Found"},
		{"guest", "/api/users/nobody", http.StatusNotFound, "Not Found"},
		{"guest", "/api/users/nobody/permissions", http.StatusNotFound, "Not Found"},
		{"guest", "/api/permissions/%2F/watcher", http.StatusNotFound, "Not Found"},
		{"guest", "/api/vhosts/nowhere", http.StatusNotFound, "Not Found"},
		{"watcher", "/api/queues/nowhere", http.StatusNotFound, "Not Found"},
	} {
		start := time.Now()
		code, got := request(t, srv, c.user, c.user, http.MethodGet, c.path, "", "")
		took := time.Since(start)
		if code != c.code || !strings.Contains(got, c.body) {
			t.Errorf("GET %s as %s on a cut-off node: %d %s, want %d with %q", c.path, c.user, code, got, c.code, c.body)
		}
		// A loaded machine gets room, but far less than the catch-up's
		// own bound.
		if took > wait+3*time.Second {
			t.Errorf("GET %s as %s on a cut-off node answered after %v, want about %v", c.path, c.user, took, wait)
		}
	}
	if code, got := request(t, srv, "guest", "wrong", http.MethodGet, "/api/overview", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /api/overview with a wrong password on a cut-off node: %d %s, want 401", code, got)
	}

	patient, kv := cutOffAPI(t, time.Minute)
	for _, path := range []string{"/api/overview", "/api/queues/%2F"} {
		user := "watcher"
		if path == "/api/overview" {
			user = "nobody" // the login misses
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, patient.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(user, user)
		if resp, err := patient.Client().Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("GET %s as %s answered %d before its client went away", path, user, resp.StatusCode)
		}
		cancel()
		deadline := time.Now().Add(10 * time.Second)
		for kv.waiting.Load() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("GET %s as %s: the catch-up still waits 10 s after its client went away", path, user)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// countingKV is the users' and permissions' metadata log, counting its
// barriers (the catch-ups of lookups that miss).
type countingKV struct {
	*kvtest.Mem
	barriers atomic.Int64
}

func (kv *countingKV) BarrierContext(ctx context.Context) error {
	kv.barriers.Add(1)
	return kv.Mem.BarrierContext(ctx)
}

// TestVHostListingCatchesUpOnce: listing the vhosts as a user with a
// permission in one of six catches up once for the five it lacks, not
// once a vhost (a metadata write each).
func TestVHostListingCatchesUpOnce(t *testing.T) {
	reg := newRegistry(t)
	kv := &countingKV{Mem: kvtest.New()}
	cfg := withStoresOver(t, Config{Version: "test"}, kv)
	if err := cfg.Users.Put("watcher", "watcher", []string{users.TagManagement}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Access.GrantAll("watcher", mq.DefaultVHost); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := reg.AddVHost(fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(New(reg, cfg))
	t.Cleanup(srv.Close)
	before := kv.barriers.Load()
	code, body := request(t, srv, "watcher", "watcher", http.MethodGet, "/api/vhosts", "", "")
	var listed []struct{ Name string }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &listed) != nil || len(listed) != 1 || listed[0].Name != mq.DefaultVHost {
		t.Fatalf("GET /api/vhosts as watcher: %d %s, want only %q", code, body, mq.DefaultVHost)
	}
	if n := kv.barriers.Load() - before; n != 1 {
		t.Errorf("the listing ran %d barriers, want 1", n)
	}
}

// cutOffTopics is the Kafka view of a node cut off from the metadata
// quorum: its catch-up waits until its caller's context ends, or for the
// metadata write timeout, as the broker's barrier does there.
type cutOffTopics struct{ laggingTopics }

func (k *cutOffTopics) CatchUp(ctx context.Context) bool {
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
	}
	return false
}

// TestCutOffNodeAnswersKafkaTopicsInTime: on a node cut off from the
// metadata quorum, a Kafka topic that exists nowhere is 404 once the
// lookup's bound runs out, not when the catch-up gives up (30 s).
func TestCutOffNodeAnswersKafkaTopicsInTime(t *testing.T) {
	const wait = 300 * time.Millisecond
	s := New(newRegistry(t), withUsers(t, Config{Version: "test"}, guestOnly))
	s.lookupWait = wait
	s.ServeKafka(&cutOffTopics{})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	for _, path := range []string{"/api/kafka/topics/nowhere", "/api/kafka/topics/nowhere/partitions/0/records"} {
		start := time.Now()
		code, got := call(t, srv, http.MethodGet, path, "")
		took := time.Since(start)
		if code != http.StatusNotFound {
			t.Errorf("GET %s on a cut-off node: %d %s, want 404", path, code, got)
		}
		// A loaded machine gets room, but far less than the catch-up's
		// own bound.
		if took > wait+3*time.Second {
			t.Errorf("GET %s on a cut-off node answered after %v, want about %v", path, took, wait)
		}
	}
}
