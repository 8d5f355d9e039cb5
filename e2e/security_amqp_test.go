package e2e

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// tlsNode starts a node with AMQPS and HTTPS on 127.0.0.1 and pki's
// server certificate; with clientCA, TLS clients must present a
// certificate pki's CA signed.
func tlsNode(t *testing.T, pki *nodetest.PKI, clientCA bool) *node.Node {
	t.Helper()
	return nodetest.Start(t, nodetest.WithConfig(func(c *node.Config) {
		c.Security.TLS = pki.ServerFiles(clientCA)
		c.AMQPSAddr, c.HTTPSAddr = "127.0.0.1:0", "127.0.0.1:0"
	}))
}

// syncBuffer is a log destination tests can read while the node writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// addAMQPUser creates a user (without a password when password is "")
// with tags and every permission in "/".
func addAMQPUser(t *testing.T, n *node.Node, name, password string, tags ...string) {
	t.Helper()
	var err error
	if password == "" {
		err = n.Users().PutCredentials(name, nil, tags)
	} else {
		err = n.Users().Put(name, password, tags)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Access().GrantAll(name, "/"); err != nil {
		t.Fatal(err)
	}
}

// roundTrip publishes a message to a new queue on conn and gets it back.
func roundTrip(t *testing.T, conn *amqp.Connection, queue string) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(queue, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", queue, false, false, amqp.Publishing{Body: []byte("over tls")}); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if d, ok, err := ch.Get(queue, true); err != nil {
			t.Fatal(err)
		} else if ok {
			if string(d.Body) != "over tls" {
				t.Fatalf("got %q", d.Body)
			}
			return
		}
	}
	t.Fatal("the message did not come back")
}

// apiGet GETs a management API URL with client as user and returns the
// status and body.
func apiGet(t *testing.T, client *http.Client, url, user, password string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, password)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestAMQPSWithPlainAndExternal: amqp091-go over AMQPS logs in with PLAIN
// and, with a client certificate, with EXTERNAL as the certificate's
// common name; the management API over HTTPS shows both connections as
// TLS ones. A certificate naming no user, and a client without one, are
// refused.
func TestAMQPSWithPlainAndExternal(t *testing.T) {
	pki := nodetest.NewPKI(t)
	n := tlsNode(t, pki, true)
	addAMQPUser(t, n, "app", "App-Pass-1", "administrator")
	addAMQPUser(t, n, "cert-user", "")
	clientTLS := pki.ClientConfig
	plain, err := amqp.DialTLS("amqps://app:App-Pass-1@"+n.AMQPSAddr()+"/", clientTLS("app"))
	if err != nil {
		t.Fatalf("PLAIN over AMQPS: %v", err)
	}
	defer plain.Close()
	roundTrip(t, plain, "plain-q")

	external, err := amqp.DialTLS_ExternalAuth("amqps://"+n.AMQPSAddr()+"/", clientTLS("cert-user"))
	if err != nil {
		t.Fatalf("EXTERNAL over AMQPS: %v", err)
	}
	defer external.Close()
	roundTrip(t, external, "external-q")

	https := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS("app")}}
	defer https.CloseIdleConnections()
	var conns []map[string]any
	code, body := apiGet(t, https, "https://"+n.HTTPSAddr()+"/api/connections", "app", "App-Pass-1")
	if err := json.Unmarshal(body, &conns); code != 200 || err != nil {
		t.Fatalf("GET /api/connections over HTTPS: %d %s", code, body)
	}
	seen := map[string]bool{}
	for _, c := range conns {
		if c["ssl"] != true || c["ssl_protocol"] != "tlsv1.3" || !strings.Contains(c["peer_cert_subject"].(string), "CN=") {
			t.Errorf("connection %v", c)
		}
		seen[c["user"].(string)+"/"+c["auth_mechanism"].(string)] = true
	}
	if !seen["app/PLAIN"] || !seen["cert-user/EXTERNAL"] {
		t.Fatalf("connections seen: %v", seen)
	}

	_, err = amqp.DialTLS_ExternalAuth("amqps://"+n.AMQPSAddr()+"/", clientTLS("nobody"))
	if !errors.Is(err, amqp.ErrCredentials) && !strings.Contains(err.Error(), "403") {
		t.Fatalf("EXTERNAL with a certificate naming no user: %v", err)
	}
	if c, err := amqp.DialTLS("amqps://app:App-Pass-1@"+n.AMQPSAddr()+"/", pki.ClientConfig("")); err == nil {
		c.Close()
		t.Fatal("a client without a certificate got in although --tls-client-ca is set")
	}
}

// TestTLSReloadKeepsConnections: after SIGHUP's reload an established
// AMQPS connection goes on, and new connections, AMQPS and HTTPS, get the
// new certificate.
func TestTLSReloadKeepsConnections(t *testing.T) {
	old := nodetest.NewPKI(t)
	n := tlsNode(t, old, false)
	trusting := func(pki *nodetest.PKI) *tls.Config { return pki.ClientConfig("") }
	established, err := amqp.DialTLS("amqps://guest:guest@"+n.AMQPSAddr()+"/", trusting(old))
	if err != nil {
		t.Fatal(err)
	}
	defer established.Close()
	roundTrip(t, established, "before")

	renewed := nodetest.NewPKI(t)
	old.RenewWith(renewed)
	if err := n.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, established, "after")
	if c, err := amqp.DialTLS("amqps://guest:guest@"+n.AMQPSAddr()+"/", trusting(old)); err == nil {
		c.Close()
		t.Fatal("a new AMQPS connection got the old certificate after the reload")
	}
	fresh, err := amqp.DialTLS("amqps://guest:guest@"+n.AMQPSAddr()+"/", trusting(renewed))
	if err != nil {
		t.Fatalf("a new AMQPS connection after the reload: %v", err)
	}
	fresh.Close()
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: trusting(renewed)}}
	defer https.CloseIdleConnections()
	if code, body := apiGet(t, https, "https://"+n.HTTPSAddr()+"/api/overview", "guest", "guest"); code != 200 {
		t.Fatalf("HTTPS with the new certificate: %d %s", code, body)
	}
}

// TestDeletingAVHostOrUserClosesItsConnections: as in RabbitMQ, deleting
// a vhost closes its connections (320 "vhost 'v2' is deleted") and takes
// its queues; deleting a user closes that user's connections.
func TestDeletingAVHostOrUserClosesItsConnections(t *testing.T) {
	n := startNode(t)
	api := nodetest.HTTPURL(n)
	call := func(method, path, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, api+path, strings.NewReader(body))
		req.SetBasicAuth("guest", "guest")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	do := func(method, path, body string) {
		t.Helper()
		if code := call(method, path, body); code >= 300 {
			t.Fatalf("%s %s: %d", method, path, code)
		}
	}
	do("PUT", "/api/vhosts/v2", "{}")
	do("PUT", "/api/users/app", `{"password":"App-Pass-1","tags":""}`)
	do("PUT", "/api/permissions/%2F/app", `{"configure":".*","write":".*","read":".*"}`)

	inV2, err := amqp.Dial("amqp://guest:guest@" + n.AMQPAddr() + "/v2")
	if err != nil {
		t.Fatal(err)
	}
	defer inV2.Close()
	ch, err := inV2.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("orders", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	asApp, err := amqp.Dial("amqp://app:App-Pass-1@" + n.AMQPAddr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer asApp.Close()
	v2Closed := inV2.NotifyClose(make(chan *amqp.Error, 1))
	appClosed := asApp.NotifyClose(make(chan *amqp.Error, 1))

	do("DELETE", "/api/vhosts/v2", "")
	if e := <-v2Closed; e == nil || e.Code != amqp.ConnectionForced || e.Reason != "CONNECTION_FORCED - vhost 'v2' is deleted" {
		t.Fatalf("connection to the deleted vhost: %v", e)
	}
	do("PUT", "/api/vhosts/v2", "{}")
	if code := call("GET", "/api/queues/v2/orders", ""); code != 404 {
		t.Fatalf("the deleted vhost's durable queue: %d", code)
	}
	do("DELETE", "/api/users/app", "")
	if e := <-appClosed; e == nil || e.Code != amqp.ConnectionForced || e.Reason != "CONNECTION_FORCED - user 'app' is deleted" {
		t.Fatalf("connection of the deleted user: %v", e)
	}
}

// TestAMQPDenialsAndNoPasswordInLogs: wrong password, unknown user, a
// user without write permission on an exchange (403) and without a
// permission in the vhost (530); no password reaches the log.
func TestAMQPDenialsAndNoPasswordInLogs(t *testing.T) {
	logs := &syncBuffer{}
	n := startNode(t, nodetest.WithConfig(func(c *node.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}))
	if err := n.Users().Put("reader", "Reader-Pass-7", nil); err != nil {
		t.Fatal(err)
	}
	if err := n.Access().SetPermission(access.Permission{User: "reader", VHost: "/", Configure: ".*", Write: "^$", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	if err := n.Users().Put("outsider", "Outsider-Pass-8", nil); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"amqp://reader:Wrong-Guess-3@", "amqp://nobody:Wrong-Guess-4@"} {
		if c, err := amqp.Dial(url + n.AMQPAddr() + "/"); err == nil || !errors.Is(err, amqp.ErrCredentials) && !strings.Contains(err.Error(), "403") {
			if c != nil {
				c.Close()
			}
			t.Fatalf("%s: %v", url, err)
		}
	}
	if _, err := amqp.Dial("amqp://outsider:Outsider-Pass-8@" + n.AMQPAddr() + "/"); err == nil || !strings.Contains(err.Error(), "access to vhost '/' refused for user 'outsider'") {
		t.Fatalf("a user without a permission in /: %v", err)
	}
	conn, err := amqp.Dial("amqp://reader:Reader-Pass-7@" + n.AMQPAddr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Publish("amq.direct", "k", false, false, amqp.Publishing{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if e := <-closed; e == nil || e.Code != amqp.AccessRefused ||
		e.Reason != "ACCESS_REFUSED - write access to exchange 'amq.direct' in vhost '/' refused for user 'reader'" {
		t.Fatalf("publish without write permission: %v", e)
	}
	for _, secret := range []string{"Wrong-Guess", "Reader-Pass", "Outsider-Pass"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("a password (%s...) is in the log", secret)
		}
	}
	if !strings.Contains(logs.String(), "invalid credentials for user 'nobody'") {
		t.Fatal("a failed login is not logged")
	}
}

// TestFailedLoginsAreSlowedDown: after a few failed logins from one
// address, over the management API, the next login from there, over
// AMQP and with the right password, waits its turn (the limiter is the
// node's, shared by every protocol); it then gets in, and a success
// clears the record.
func TestFailedLoginsAreSlowedDown(t *testing.T) {
	n := startNode(t)
	for range 4 {
		req, _ := http.NewRequest("GET", nodetest.HTTPURL(n)+"/api/overview", nil)
		req.SetBasicAuth("guest", "Wrong-Guess-5")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("a wrong password: %d", resp.StatusCode)
		}
	}
	login := func() time.Duration {
		t.Helper()
		start := time.Now()
		conn, err := amqp.Dial(nodetest.AMQPURL(n))
		if err != nil {
			t.Fatalf("the right password after failures: %v", err)
		}
		conn.Close()
		return time.Since(start)
	}
	// Four failures: three free, then 200 ms and 400 ms apart.
	if took := login(); took < 300*time.Millisecond {
		t.Fatalf("a login after four failures from the address took %v, want it held back", took)
	}
	if took := login(); took > 5*time.Second {
		t.Fatalf("a success did not clear the address's failures: the next login took %v", took)
	}
}
