package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/users"
)

// TestUsersAsRabbitMQ: PUT, GET and DELETE of users with RabbitMQ's
// shapes, statuses and refusals; the password never comes back, its hash
// does, in Wharf's format, and moves a user to another node.
func TestUsersAsRabbitMQ(t *testing.T) {
	srv, api := tagged(t)
	admin := func(method, path, body string) (int, string) { return callUser(t, srv, "guest", method, path, body) }

	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{"password":"Secret-1","tags":"management,monitoring"}`, 201, ""},
		{`{"password":"Secret-2","tags":["management"]}`, 204, ""},
		{`{"password":"x"}`, 400, `"tags_not_present"`},
		{`{"password":"x","password_hash":"y","tags":""}`, 400, "both_password_and_password_hash_are_provided"},
		{`{"password_hash":"PjpgqSV4Ev52rhEmCy4fZsgO+RNuoQzhhFdCIDznZVAH1qmS","hashing_algorithm":"rabbit_password_hashing_sha256","tags":""}`,
			400, "rabbit_password_hashing_sha256 cannot be used"},
		{`{"password":"","tags":""}`, 400, "empty password"},
	} {
		if code, body := admin("PUT", "/api/users/alice", tc.body); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("PUT %s: %d %s, want %d %s", tc.body, code, body, tc.code, tc.want)
		}
	}
	if _, ok := api.cfg.Users.Authenticate("alice", "Secret-2"); !ok {
		t.Fatal("alice cannot log in with the password set last")
	}
	code, body := admin("GET", "/api/users/alice", "")
	u := decode[map[string]any](t, body)
	if code != 200 || u["hashing_algorithm"] != users.HashingAlgorithm || u["tags"].([]any)[0] != "management" ||
		!strings.HasPrefix(u["password_hash"].(string), "SCRAM-SHA-256$4096:") || strings.Contains(body, "Secret") {
		t.Fatalf("GET alice: %d %s", code, body)
	}
	moved := `{"password_hash":"` + u["password_hash"].(string) + `","hashing_algorithm":"wharf_scram","tags":""}`
	if code, body := admin("PUT", "/api/users/alice2", moved); code != 201 {
		t.Fatalf("PUT with alice's hash: %d %s", code, body)
	}
	if _, ok := api.cfg.Users.Authenticate("alice2", "Secret-2"); !ok {
		t.Fatal("a user made from alice's hash does not take alice's password")
	}
	if code, body := admin("PUT", "/api/users/certonly", `{"tags":"management"}`); code != 201 {
		t.Fatalf("a passwordless user: %d %s", code, body)
	}
	if code, body := admin("GET", "/api/users", ""); code != 200 || !strings.Contains(body, `"name":"certonly","password_hash":""`) {
		t.Fatalf("users: %d %s", code, body)
	}
	if code, _ := admin("DELETE", "/api/users/alice2", ""); code != 204 {
		t.Fatalf("DELETE: %d", code)
	}
	if code, body := admin("DELETE", "/api/users/alice2", ""); code != 404 {
		t.Fatalf("DELETE again: %d %s", code, body)
	}
}

// TestPermissionsAsRabbitMQ: permissions and topic permissions through
// the API, with RabbitMQ's refusals; deleting a user takes its
// permissions.
func TestPermissionsAsRabbitMQ(t *testing.T) {
	srv, api := tagged(t)
	admin := func(method, path, body string) (int, string) { return callUser(t, srv, "guest", method, path, body) }
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"PUT", "/api/permissions/v1/mon", `{"configure":"^a","write":".*","read":".*"}`, 201, ""},
		{"PUT", "/api/permissions/v1/mon", `{"configure":"^b","write":".*","read":".*"}`, 204, ""},
		{"PUT", "/api/permissions/v1/mon", `{"configure":"^b"}`, 400, `"[{key_missing,write},{key_missing,read}]"`},
		{"PUT", "/api/permissions/v1/mon", `{"configure":"(","write":".*","read":".*"}`, 400, "invalid regular expression"},
		{"PUT", "/api/permissions/nope/mon", `{"configure":"","write":"","read":""}`, 400, `"vhost_or_user_not_found"`},
		{"PUT", "/api/permissions/v1/nobody", `{"configure":"","write":"","read":""}`, 400, `"vhost_or_user_not_found"`},
		{"GET", "/api/permissions/v1/mon", "", 200, `{"configure":"^b","read":".*","user":"mon","vhost":"v1","write":".*"}`},
		{"GET", "/api/permissions/%2F/mon", "", 404, ""},
		{"GET", "/api/users/mon/permissions", "", 200, `"vhost":"v1"`},
		{"GET", "/api/vhosts/v1/permissions", "", 200, `"user":"pol"`},
		{"GET", "/api/users/nobody/permissions", "", 404, ""},
		{"PUT", "/api/topic-permissions/v1/mon", `{"exchange":"amq.topic","write":"^a","read":".*"}`, 201, ""},
		{"PUT", "/api/topic-permissions/v1/mon", `{"exchange":"x2","write":"^a","read":".*"}`, 201, ""},
		{"PUT", "/api/topic-permissions/v1/mon", `{"exchange":"x2","write":"^b","read":".*"}`, 204, ""},
		{"PUT", "/api/topic-permissions/v1/mon", `{"write":"^a","read":".*"}`, 400, `"[{key_missing,exchange}]"`},
		{"GET", "/api/topic-permissions/v1/mon", "", 200, `"exchange":"x2","read":".*","user":"mon","vhost":"v1","write":"^b"`},
		{"GET", "/api/topic-permissions", "", 200, `"exchange":"amq.topic"`},
		{"DELETE", "/api/permissions/v1/mon", "", 204, ""},
		{"DELETE", "/api/permissions/v1/mon", "", 404, ""},
		{"DELETE", "/api/topic-permissions/v1/mon", "", 204, ""},
		{"GET", "/api/topic-permissions/v1/mon", "", 200, "[]"},
	} {
		if code, body := admin(tc.method, tc.path, tc.body); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %s: %d %s, want %d %s", tc.method, tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	if code, _ := admin("DELETE", "/api/users/pol", ""); code != 204 {
		t.Fatal("DELETE pol")
	}
	if api.cfg.Access.HasVHostAccessContext(context.Background(), "pol", "v1") {
		t.Fatal("a deleted user's permission stayed")
	}
}

// TestVHostsAtRunTime: PUT creates a vhost whose creator gets every
// permission in it; DELETE removes it with its queues and permissions.
func TestVHostsAtRunTime(t *testing.T) {
	srv, api := tagged(t)
	admin := func(method, path, body string) (int, string) { return callUser(t, srv, "guest", method, path, body) }
	if code, body := admin("PUT", "/api/vhosts/v2", "{}"); code != 201 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if code, _ := admin("PUT", "/api/vhosts/v2", `{"description":"ignored"}`); code != 204 {
		t.Fatalf("PUT again: %d", code)
	}
	if p, ok := api.cfg.Access.Permission("guest", "v2"); !ok || p.Configure != ".*" || p.Write != ".*" || p.Read != ".*" {
		t.Fatalf("the creator's permission: %+v %v", p, ok)
	}
	if code, body := admin("PUT", "/api/queues/v2/q", "{}"); code != 201 {
		t.Fatalf("a queue in the new vhost: %d %s", code, body)
	}
	if code, body := admin("PUT", "/api/permissions/v2/mgmt", `{"configure":".*","write":".*","read":".*"}`); code != 201 {
		t.Fatalf("%d %s", code, body)
	}
	if code, _ := callUser(t, srv, "mgmt", "DELETE", "/api/vhosts/v2", ""); code != 401 {
		t.Fatalf("a management user deleted a vhost: %d", code)
	}
	if code, _ := admin("DELETE", "/api/vhosts/v2", ""); code != 204 {
		t.Fatalf("DELETE: %d", code)
	}
	if _, err := api.reg.VHost("v2"); err == nil {
		t.Fatal("the vhost is still there")
	}
	if api.cfg.Access.HasVHostAccessContext(context.Background(), "mgmt", "v2") || api.cfg.Access.HasVHostAccessContext(context.Background(), "guest", "v2") {
		t.Fatal("permissions in a deleted vhost stayed")
	}
	if code, _ := admin("DELETE", "/api/vhosts/v2", ""); code != 404 {
		t.Fatalf("DELETE again: %d", code)
	}
	if code, body := admin("GET", "/api/queues/v2/q", ""); code != 404 {
		t.Fatalf("the deleted vhost's queue: %d %s", code, body)
	}
}

// TestDefinitionsCarryUsersAndPermissions: an export holds users with
// their hashes (no password), permissions and topic permissions, and an
// import into a new node brings them back, so users log in there with
// their passwords; RabbitMQ's hashes are skipped with a warning.
func TestDefinitionsCarryUsersAndPermissions(t *testing.T) {
	srv, api := tagged(t)
	if err := api.cfg.Users.Put("app", "App-Secret-9", []string{users.TagManagement}); err != nil {
		t.Fatal(err)
	}
	if code, body := callUser(t, srv, "guest", "PUT", "/api/topic-permissions/v1/pol", `{"exchange":"amq.topic","write":"^a","read":".*"}`); code != 201 {
		t.Fatalf("%d %s", code, body)
	}
	code, defs := callUser(t, srv, "guest", "GET", "/api/definitions", "")
	if code != 200 || strings.Contains(defs, "App-Secret") || !strings.Contains(defs, `"hashing_algorithm":"wharf_scram"`) ||
		!strings.Contains(defs, `"configure":"^b"`) || !strings.Contains(defs, `"exchange":"amq.topic"`) {
		t.Fatalf("export: %d %s", code, defs)
	}
	// RabbitMQ's own export of a user, which Wharf cannot use.
	defs = strings.Replace(defs, `"users":[`, `"users":[{"name":"rabbit","password_hash":"PjpgqSV4Ev52rhEmCy4fZsgO+RNuoQzhhFdCIDznZVAH1qmS",`+
		`"hashing_algorithm":"rabbit_password_hashing_sha256","tags":["administrator"],"limits":{}},`, 1)

	var logs bytes.Buffer
	reg := newRegistry(t)
	fresh := New(reg, withUsers(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, guestOnly))
	freshSrv := httptest.NewServer(fresh)
	t.Cleanup(freshSrv.Close)
	if code, body := callUser(t, freshSrv, "guest", "POST", "/api/definitions", defs); code != 204 {
		t.Fatalf("import: %d %s", code, body)
	}
	if u, ok := fresh.cfg.Users.Authenticate("app", "App-Secret-9"); !ok || !u.HasTag(users.TagManagement) {
		t.Fatalf("the imported user cannot log in with its password: %+v", u)
	}
	if p, ok := fresh.cfg.Access.Permission("mgmt", "v1"); !ok || p.Configure != "^b" {
		t.Fatalf("imported permission: %+v %v", p, ok)
	}
	if n := len(fresh.cfg.Access.TopicPermissions()); n != 1 {
		t.Fatalf("%d topic permissions imported", n)
	}
	if _, ok := fresh.cfg.Users.Get("rabbit"); ok || !strings.Contains(logs.String(), "user=rabbit") {
		t.Fatalf("a RabbitMQ hash was imported, or skipped silently: %s", logs.String())
	}
}

// TestPasswordsStayOutOfLogs: failed and successful logins and user
// changes log no password.
func TestPasswordsStayOutOfLogs(t *testing.T) {
	var logs bytes.Buffer
	reg := newRegistry(t)
	api := New(reg, withUsers(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, guestOnly))
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	callUser(t, srv, "guest", "PUT", "/api/users/pw", `{"password":"Hunter2-Secret","tags":"administrator"}`)
	callUser(t, srv, "guest", "PUT", "/api/users/pw", `{"password":"","tags":"administrator"}`)
	callUser(t, srv, "pw", "GET", "/api/overview", "") // password "pw": wrong
	for _, wrong := range []string{"Wrong-Guess-1", "Wrong-Guess-2"} {
		req := httptest.NewRequest("GET", "/api/overview", nil)
		req.SetBasicAuth("guest", wrong)
		api.ServeHTTP(httptest.NewRecorder(), req)
	}
	for _, secret := range []string{"Hunter2-Secret", "Wrong-Guess"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("a password is in the log:\n%s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), "invalid credentials") {
		t.Fatalf("failed logins are not logged:\n%s", logs.String())
	}
}
