package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/users"
)

// tagged is an API whose users carry RabbitMQ's tags: guest (administrator,
// everything in "/"), mgmt (management; in "v1" configure "^b" only),
// mon (monitoring; no permission anywhere), pol (policymaker; everything
// in "v1") and notag (no tag; everything in "/"). Every password is "pw"
// but guest's.
func tagged(t *testing.T) (*httptest.Server, *Server) {
	t.Helper()
	reg := newRegistry(t)
	api := New(reg, withUsers(t, Config{}, guestOnly))
	if _, err := reg.AddVHost("v1"); err != nil {
		t.Fatal(err)
	}
	for name, tags := range map[string][]string{"mgmt": {users.TagManagement}, "mon": {users.TagMonitoring},
		"pol": {users.TagPolicymaker}, "notag": nil} {
		if err := api.cfg.Users.Put(name, "pw", tags); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []access.Permission{
		{User: "mgmt", VHost: "v1", Configure: "^b", Write: ".*", Read: ".*"},
		{User: "pol", VHost: "v1", Configure: ".*", Write: ".*", Read: ".*"},
		{User: "notag", VHost: "/", Configure: ".*", Write: ".*", Read: ".*"},
	} {
		if err := api.cfg.Access.SetPermission(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []struct{ vhost, name string }{{"/", "qroot"}, {"v1", "qa"}} {
		v, _ := reg.VHost(q.vhost)
		if _, err := v.DeclareQueue(mq.QueueDef{Name: q.name}, false); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return srv, api
}

// callUser does one request as user (password "pw", guest's "guest").
func callUser(t *testing.T, srv *httptest.Server, user, method, path, body string) (int, string) {
	t.Helper()
	password, contentType := "pw", ""
	if user == "guest" {
		password = "guest"
	}
	if body != "" {
		contentType = "application/json"
	}
	return request(t, srv, user, password, method, path, contentType, body)
}

// TestTagRulesAsRabbitMQ: each tag opens what it opens in RabbitMQ 4.x,
// with RabbitMQ's statuses and reasons (compared against RabbitMQ; the
// 404 for a vhost without permission is 4.x's, 3.x answered 401).
func TestTagRulesAsRabbitMQ(t *testing.T) {
	srv, _ := tagged(t)
	const (
		notManager = `{"error":"not_authorised","reason":"Not management user"}`
		notAdmin   = `{"error":"not_authorised","reason":"Not administrator user"}`
		notMonitor = `{"error":"not_authorised","reason":"Not monitor user"}`
		notObject  = `{"error":"not_authorised","reason":"User not authorised to access object"}`
		noVHost    = `{"error":"not_found","reason":"Not Found"}`
		refused    = `{"error":"not_authorised","reason":"Access refused."}`
	)
	policy := `{"pattern":"^x","definition":{"message-ttl":1}}`
	for _, tc := range []struct {
		user, method, path, body string
		code                     int
		want                     string // the body, or a part of it
	}{
		{"notag", "GET", "/api/overview", "", 401, notManager},
		{"notag", "GET", "/api/queues/%2F", "", 401, notManager},
		{"mgmt", "GET", "/api/whoami", "", 200, `{"name":"mgmt","tags":["management"]}`},
		{"mgmt", "GET", "/api/overview", "", 200, `"queues":1`},
		{"mgmt", "GET", "/api/users", "", 401, notAdmin},
		{"mgmt", "GET", "/api/permissions", "", 401, notAdmin},
		{"mgmt", "GET", "/api/definitions", "", 401, notAdmin},
		{"mgmt", "GET", "/api/vhosts/v1", "", 401, notAdmin},
		{"mgmt", "GET", "/api/nodes", "", 401, notMonitor},
		{"mgmt", "GET", "/api/vhosts", "", 200, `"name":"v1"`},
		{"mgmt", "GET", "/api/queues", "", 200, `"name":"qa"`},
		{"mgmt", "GET", "/api/queues/%2F", "", 404, noVHost},
		{"mgmt", "GET", "/api/queues/%2F/qroot", "", 404, noVHost},
		{"mgmt", "GET", "/api/queues/v1/qa", "", 200, `"name":"qa"`},
		{"mgmt", "PUT", "/api/policies/v1/p", policy, 401, notObject},
		{"mgmt", "PUT", "/api/queues/v1/bq", "{}", 201, ""},
		{"mgmt", "PUT", "/api/queues/v1/aq", "{}", 401, refused},
		{"mgmt", "DELETE", "/api/queues/v1/qa", "", 401, refused},
		{"mon", "GET", "/api/vhosts", "", 200, `"name":"/"`},
		{"mon", "GET", "/api/nodes", "", 200, `"name":"wharf@`},
		{"mon", "GET", "/api/queues", "", 200, `[]`},
		{"mon", "GET", "/api/queues/v1", "", 404, noVHost},
		{"mon", "GET", "/api/users", "", 401, notAdmin},
		{"pol", "PUT", "/api/policies/v1/p", policy, 201, ""},
		{"pol", "PUT", "/api/policies/%2F/p", policy, 404, noVHost},
		{"pol", "GET", "/api/nodes", "", 401, notMonitor},
		{"guest", "GET", "/api/queues/v1/qa", "", 200, `"name":"qa"`},
		// An administrator without a permission in v1 is refused AMQP
		// changes there, as in RabbitMQ.
		{"guest", "PUT", "/api/queues/v1/zq", "{}", 401, refused},
	} {
		code, body := callUser(t, srv, tc.user, tc.method, tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %s: %d %s, want %d %s", tc.user, tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
	if code, body := callUser(t, srv, "mgmt", "GET", "/api/vhosts", ""); code != 200 || strings.Contains(body, `"name":"/"`) {
		t.Errorf("mgmt sees vhosts it has no permission in: %s", body)
	}
	if code, body := callUser(t, srv, "mgmt", "GET", "/api/queues", ""); code != 200 || strings.Contains(body, "qroot") {
		t.Errorf("mgmt sees queues of a vhost it has no permission in: %s", body)
	}
}
