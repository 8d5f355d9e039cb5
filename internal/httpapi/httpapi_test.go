package httpapi

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/kvtest"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/users"
)

type memDefs struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memDefs) Put(k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = v
	return nil
}

func (s *memDefs) Delete(k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}

func (s *memDefs) Load(fn func(string, []byte) error) error {
	s.mu.Lock()
	m := maps.Clone(s.m)
	s.mu.Unlock()
	for k, v := range m {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

func newRegistry(t *testing.T) *mq.Registry {
	t.Helper()
	reg, err := mq.Open(mq.Config{DataDir: t.TempDir(), Definitions: &memDefs{m: map[string][]byte{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

// withUsers returns cfg with a user store holding users (name to
// password), every one an administrator with every permission in "/",
// as guest is on a new node.
func withUsers(t *testing.T, cfg Config, passwords map[string]string) Config {
	t.Helper()
	cfg = withStoresOver(t, cfg, kvtest.New()) // users and permissions follow it, as the definition store
	for name, password := range passwords {
		if err := cfg.Users.Put(name, password, []string{users.TagAdministrator}); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Access.GrantAll(name, mq.DefaultVHost); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// withStoresOver returns cfg with users and permissions kept in kv, as a
// node keeps them in its definition store.
func withStoresOver(t *testing.T, cfg Config, kv interface {
	users.KV
	access.KV
}) Config {
	t.Helper()
	var err error
	if cfg.Users, err = users.Open(kv); err != nil {
		t.Fatal(err)
	}
	if cfg.Access, err = access.Open(kv); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// guestOnly is the users of a new node.
var guestOnly = map[string]string{"guest": "guest"}

func newAPI(t *testing.T) (*httptest.Server, *mq.VHost) {
	t.Helper()
	reg := newRegistry(t)
	srv := httptest.NewServer(New(reg, withUsers(t, Config{Version: "test"}, guestOnly)))
	t.Cleanup(srv.Close)
	v, _ := reg.VHost("/")
	return srv, v
}

// call does one request as guest, with a JSON body if body is not empty,
// and returns the status and body.
func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	contentType := ""
	if body != "" {
		contentType = "application/json"
	}
	return callAs(t, srv, method, path, contentType, body)
}

// callAs is call with the Content-Type header given ("": none).
func callAs(t *testing.T, srv *httptest.Server, method, path, contentType, body string) (int, string) {
	t.Helper()
	return request(t, srv, "guest", "guest", method, path, contentType, body)
}

// request does one request as user, with the Content-Type header given
// ("": none), and returns the status and body.
func request(t *testing.T, srv *httptest.Server, user, password, method, path, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, password)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return v
}

func TestAuth(t *testing.T) {
	srv, _ := newAPI(t)
	resp, err := srv.Client().Get(srv.URL + "/api/overview")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no credentials: %d %v", resp.StatusCode, resp.Header)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/overview", nil)
	req.SetBasicAuth("guest", "wrong")
	resp, err = srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(b), `"not_authorized"`) {
		t.Fatalf("wrong password: %d %s", resp.StatusCode, b)
	}
	code, body := call(t, srv, "GET", "/api/overview", "")
	ov := decode[map[string]any](t, body)
	if code != 200 || ov["product_name"] != "Wharf" || ov["cluster_name"] != "wharf" {
		t.Fatalf("overview: %d %s", code, body)
	}
}

func TestNotFoundAsRabbitMQ(t *testing.T) {
	srv, _ := newAPI(t)
	for _, path := range []string{"/api/queues/%2F/missing", "/api/queues/nosuchvhost", "/api/policies/%2F/missing", "/api/nothing"} {
		code, body := call(t, srv, "GET", path, "")
		if code != 404 || strings.TrimSpace(body) != `{"error":"Object Not Found","reason":"Not Found"}` {
			t.Errorf("GET %s = %d %s", path, code, body)
		}
	}
	for _, path := range []string{"/api/policies/%2F/missing", "/api/policies/nosuchvhost/p"} {
		code, body := call(t, srv, "DELETE", path, "")
		if code != 404 || strings.TrimSpace(body) != `{"error":"Object Not Found","reason":"Not Found"}` {
			t.Errorf("DELETE %s = %d %s", path, code, body)
		}
	}
	// A write names the missing vhost (RabbitMQ 3.10 and 4.x), so that
	// `wharf policies set --vhost X` can say there is no vhost X.
	code, body := call(t, srv, "PUT", "/api/policies/nosuchvhost/p", `{"pattern":".*","definition":{}}`)
	if code != 404 || strings.TrimSpace(body) != `{"error":"not_found","reason":"vhost_not_found"}` {
		t.Errorf("PUT to a missing vhost = %d %s", code, body)
	}
}

func TestQueuesExchangesBindings(t *testing.T) {
	srv, v := newAPI(t)
	if _, err := v.DeclareQueue(mq.QueueDef{Name: "q1", Durable: true, Args: amqpwire.Table{"x-max-length": int32(7)}}, false); err != nil {
		t.Fatal(err)
	}
	if err := v.DeclareExchange(mq.ExchangeDef{Name: "x1", Type: "topic", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	if err := v.BindQueue("q1", "x1", "a.#", nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Publish(&mq.Message{Exchange: "", RoutingKey: "q1", Body: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	code, body := call(t, srv, "GET", "/api/queues/%2F/q1", "")
	q := decode[map[string]any](t, body)
	if code != 200 || q["name"] != "q1" || q["vhost"] != "/" || q["durable"] != true || q["type"] != "classic" ||
		q["messages"] != 1.0 || q["policy"] != nil || q["arguments"].(map[string]any)["x-max-length"] != 7.0 {
		t.Fatalf("queue: %d %s", code, body)
	}
	_, body = call(t, srv, "GET", "/api/queues", "")
	if qs := decode[[]map[string]any](t, body); len(qs) != 1 {
		t.Fatalf("queues: %s", body)
	}
	_, body = call(t, srv, "GET", "/api/exchanges/%2F", "")
	xs := decode[[]map[string]any](t, body)
	found := false
	for _, x := range xs {
		found = found || (x["name"] == "x1" && x["type"] == "topic")
	}
	if !found {
		t.Fatalf("exchanges: %s", body)
	}
	_, body = call(t, srv, "GET", "/api/bindings/%2F", "")
	bs := decode[[]map[string]any](t, body)
	if len(bs) != 2 || bs[0]["source"] != "" || bs[1]["source"] != "x1" || bs[1]["routing_key"] != "a.#" || bs[1]["destination_type"] != "queue" {
		t.Fatalf("bindings: %s", body)
	}
}

func TestPolicies(t *testing.T) {
	srv, v := newAPI(t)
	if _, err := v.DeclareQueue(mq.QueueDef{Name: "orders.1"}, false); err != nil {
		t.Fatal(err)
	}
	put := `{"pattern":"^orders\\.","definition":{"max-length":10,"dead-letter-exchange":"dlx"},"priority":3,"apply-to":"queues"}`
	if code, body := call(t, srv, "PUT", "/api/policies/%2F/lim", put); code != 201 {
		t.Fatalf("PUT new policy = %d %s", code, body)
	}
	if code, body := call(t, srv, "PUT", "/api/policies/%2F/lim", put); code != 204 {
		t.Fatalf("PUT existing policy = %d %s", code, body)
	}
	code, body := call(t, srv, "GET", "/api/policies/%2F/lim", "")
	p := decode[map[string]any](t, body)
	if code != 200 || p["vhost"] != "/" || p["name"] != "lim" || p["pattern"] != `^orders\.` || p["apply-to"] != "queues" ||
		p["priority"] != 3.0 || p["definition"].(map[string]any)["max-length"] != 10.0 {
		t.Fatalf("GET policy = %d %s", code, body)
	}
	_, body = call(t, srv, "GET", "/api/policies", "")
	if ps := decode[[]map[string]any](t, body); len(ps) != 1 {
		t.Fatalf("list: %s", body)
	}
	_, body = call(t, srv, "GET", "/api/queues/%2F/orders.1", "")
	q := decode[map[string]any](t, body)
	if q["policy"] != "lim" || q["effective_policy_definition"].(map[string]any)["dead-letter-exchange"] != "dlx" {
		t.Fatalf("queue under policy: %s", body)
	}

	bad := `{"pattern":".*","definition":{"max-priority":5}}`
	code, body = call(t, srv, "PUT", "/api/policies/%2F/bad", bad)
	e := decode[map[string]string](t, body)
	if code != 400 || e["error"] != "bad_request" || !strings.Contains(e["reason"], "not recognised policy settings") {
		t.Fatalf("invalid policy = %d %s", code, body)
	}
	if code, body := call(t, srv, "PUT", "/api/policies/%2F/bad", `{"definition":{}}`); code != 400 || !strings.Contains(body, "key_missing,pattern") {
		t.Fatalf("missing pattern = %d %s", code, body)
	}
	if code, _ := call(t, srv, "DELETE", "/api/policies/%2F/lim", ""); code != 204 {
		t.Fatalf("DELETE = %d", code)
	}
	_, body = call(t, srv, "GET", "/api/queues/%2F/orders.1", "")
	if q := decode[map[string]any](t, body); q["policy"] != nil {
		t.Fatalf("policy still shown after delete: %s", body)
	}
}

func (s *Server) mustVHost(t *testing.T, name string) *mq.VHost {
	t.Helper()
	v, err := s.reg.VHost(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRouteAndMount: other packages add endpoints below /api/ (behind
// the API's authentication, with path values) and handlers beside it.
func TestRouteAndMount(t *testing.T) {
	api := New(newRegistry(t), withUsers(t, Config{}, guestOnly))
	api.Route("GET", "kafka/topics/{topic}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"topic": r.PathValue("topic")})
	})
	api.Mount("/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up 1\n") }))
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	if code, body := call(t, srv, "GET", "/api/kafka/topics/a%2Fb", ""); code != 200 || strings.TrimSpace(body) != `{"topic":"a/b"}` {
		t.Fatalf("routed endpoint: %d %s", code, body)
	}
	resp, err := srv.Client().Get(srv.URL + "/api/kafka/topics/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("routed endpoint without credentials: %d", resp.StatusCode)
	}
	resp, err = srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "up 1\n" {
		t.Fatalf("mounted handler: %d %q", resp.StatusCode, b)
	}
	if code, _ := call(t, srv, "POST", "/api/kafka/topics/x", `{}`); code != 405 {
		t.Fatalf("other method: %d", code)
	}
	if code, _ := call(t, srv, "GET", "/api/queues/%2F/", ""); code != 200 {
		t.Fatalf("list with a trailing slash: %d", code)
	}
	if code, body := call(t, srv, "PUT", "/api/queues/%2F//", `{}`); code != 404 {
		t.Fatalf("PUT with an empty queue name: %d %s, want 404", code, body)
	}
}
