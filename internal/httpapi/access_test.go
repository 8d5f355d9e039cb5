package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// forged sends one request straight to the handler, as if it came from
// remote with the given Host header, as user: a GET of the overview, or a
// PUT of body as policy "drain".
func forged(t *testing.T, h http.Handler, method, remote, host, user, body string) (int, map[string]string) {
	t.Helper()
	path := "/api/overview"
	if method == "PUT" {
		path = "/api/policies/%2F/drain"
	}
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.RemoteAddr, req.Host = remote, host
	req.SetBasicAuth(user, "pw-"+user)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var e map[string]string
	if rec.Code >= 400 {
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
			t.Fatalf("%s from %s: %d with a body that is not a JSON error: %q", method, remote, rec.Code, rec.Body)
		}
	}
	return rec.Code, e
}

// newGuardedAPI is an API with guest (loopback only) and admin users.
func newGuardedAPI(t *testing.T) *Server {
	reg := newRegistry(t)
	return New(reg, withUsers(t, Config{}, map[string]string{"guest": "pw-guest", "admin": "pw-admin"}))
}

// TestLoopbackUserFailsClosed: guest may log in only from a loopback
// address. An IPv6 link-local peer's address carries a zone, which
// net.ParseIP could not parse; that must not count as local (a neighbour
// on the link once created a policy emptying every queue that way).
func TestLoopbackUserFailsClosed(t *testing.T) {
	api := newGuardedAPI(t)
	drain := `{"pattern":".*","definition":{"max-length":0},"apply-to":"queues"}`
	for _, remote := range []string{"[fe80::1%eth0]:40000", "[fe80::1]:40000", "10.0.0.7:40000", "[::ffff:10.0.0.7]:40000", "pipe", ""} {
		code, e := forged(t, api, "PUT", remote, "localhost:15672", "guest", drain)
		if code != 401 || e["reason"] != "User can only log in via localhost" {
			t.Errorf("guest from %q: %d %v, want 401", remote, code, e)
		}
	}
	if ps := api.mustVHost(t, "/").Policies(); len(ps) != 0 {
		t.Fatalf("a remote guest created %v", ps)
	}
	for _, remote := range []string{"127.0.0.1:40000", "[::1]:40000", "[::ffff:127.0.0.1]:40000"} {
		if code, e := forged(t, api, "GET", remote, "localhost:15672", "guest", ""); code != 200 {
			t.Errorf("guest from %q: %d %v, want 200", remote, code, e)
		}
	}
	// Users not restricted to loopback log in from anywhere.
	if code, e := forged(t, api, "PUT", "[fe80::1%eth0]:40000", "broker.example:15672", "admin", drain); code != 201 {
		t.Fatalf("admin from a link-local address: %d %v, want 201", code, e)
	}
}

// TestHostHeaderForLoopbackUsers: a loopback-only user's request must name
// this machine in Host, so a page a DNS rebinding points at 127.0.0.1
// cannot use guest/guest through a visitor's browser. Other users may
// name the broker as they like, as in RabbitMQ.
func TestHostHeaderForLoopbackUsers(t *testing.T) {
	api := newGuardedAPI(t)
	hostname, _ := os.Hostname()
	for _, host := range []string{"localhost", "localhost:15672", "LOCALHOST.:15672", "app.localhost:15672",
		"127.0.0.1:15672", "127.0.1.1:15672", "[::1]:15672", "[::1]", hostname + ":15672"} {
		if code, e := forged(t, api, "GET", "127.0.0.1:40000", host, "guest", ""); code != 200 {
			t.Errorf("guest with Host %q: %d %v, want 200", host, code, e)
		}
	}
	for _, host := range []string{"rebound.example:15672", "rebound.example", "10.0.0.7:15672", "[fe80::1%25eth0]:15672", "localhost.example:15672", ""} {
		code, e := forged(t, api, "GET", "127.0.0.1:40000", host, "guest", "")
		if code != 403 || e["error"] != "forbidden" || !strings.Contains(e["reason"], "localhost") {
			t.Errorf("guest with Host %q: %d %v, want 403", host, code, e)
		}
	}
	if code, e := forged(t, api, "GET", "127.0.0.1:40000", "broker.example:15672", "admin", ""); code != 200 {
		t.Errorf("admin with Host broker.example: %d %v, want 200", code, e)
	}
}

// TestWritesNeedJSON: a PUT must say its body is JSON (415 otherwise, and
// nothing changes); DELETE and GET carry no body and need no header.
func TestWritesNeedJSON(t *testing.T) {
	srv, v := newAPI(t)
	put := func(contentType string) (int, string) {
		return callAs(t, srv, "PUT", "/api/policies/%2F/p", contentType, `{"pattern":".*","definition":{"max-length":5}}`)
	}
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"} {
		code, body := put(ct)
		e := decode[map[string]string](t, body)
		if code != 415 || e["error"] != "unsupported_media_type" || !strings.Contains(e["reason"], "application/json") {
			t.Errorf("PUT with Content-Type %q = %d %s, want 415", ct, code, body)
		}
	}
	if ps := v.Policies(); len(ps) != 0 {
		t.Fatalf("a PUT without JSON created %v", ps)
	}
	if code, body := put("application/json; charset=utf-8"); code != 201 {
		t.Fatalf("PUT with JSON = %d %s", code, body)
	}
	if code, body := call(t, srv, "DELETE", "/api/policies/%2F/p", ""); code != 204 {
		t.Fatalf("DELETE without a Content-Type = %d %s", code, body)
	}
}

// TestIdleKeepAliveConnectionsClosed: a client that keeps its connection
// open after a request does not hold a descriptor for good.
func TestIdleKeepAliveConnectionsClosed(t *testing.T) {
	api := New(newRegistry(t), withUsers(t, Config{IdleTimeout: 100 * time.Millisecond}, guestOnly))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- api.Serve(ln) }()
	defer func() {
		api.http.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /api/overview HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("first request: %d, close=%v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	// Idle now: the server must close the connection (EOF), long before
	// the 10 s deadline.
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle keep-alive connection: read %v, want EOF from the server", err)
	}
}
