package kafka

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/wharf-mq/wharf/internal/authlimit"
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/users"
)

// The passwords of the SASL tests' users; testSASLServer checks that none
// reaches the server's log.
const (
	alicePassword = "alice-pass-4c1d"
	bobPassword   = "bob-pass-77e0"
	wrongPassword = "not-the-password-91ab"
	adminPassword = "admin-pass-1b2c"
)

var testPasswords = []string{alicePassword, bobPassword, wrongPassword, adminPassword}

// testUsers are the users of a saslTestServer.
var testUsers = map[string]string{"alice": alicePassword, "bob": bobPassword, "guest": "guest", "admin": adminPassword}

// saslTestServer is a testServer that also serves a SASL_PLAINTEXT
// listener, with users alice and bob, and keeps its log.
type saslTestServer struct {
	*testServer
	saslAddr string
	users    *users.Store
	logs     *logCapture
}

// startSASLServer starts it; adjust changes the server before it serves.
func startSASLServer(t *testing.T, adjust func(*Server), opts ...serverOption) *saslTestServer {
	t.Helper()
	sts := &saslTestServer{logs: &logCapture{}}
	sts.testServer = startServer(t, append(opts, withServer(func(s *Server) {
		store, err := users.Open(s.broker.Definitions())
		if err != nil {
			t.Fatal(err)
		}
		for user, pw := range testUsers {
			if err := store.Put(user, pw, nil); err != nil {
				t.Fatal(err)
			}
		}
		sts.users = store
		s.cfg.Users = store
		if adjust != nil {
			adjust(s)
		}
		s.log = slog.New(teeHandler{next: s.log.Handler(), logs: sts.logs})
	}))...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sts.saslAddr = ln.Addr().String()
	l := Listener{Protocol: SASLPlaintext, AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(ln.Addr().(*net.TCPAddr).Port)}
	go sts.s.ServeListener(ln, l) // ends with the server's Shutdown
	t.Cleanup(func() {
		for _, pw := range testPasswords {
			if sts.logs.contains(pw) {
				t.Errorf("the server logged a password")
			}
		}
	})
	return sts
}

// saslClient is a franz-go client of the SASL listener.
func (sts *saslTestServer) saslClient(t *testing.T, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(sts.saslAddr), kgo.SASL(m), kgo.RequestRetries(0),
		kgo.RetryTimeout(time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// metadata asks cl for the cluster's metadata.
func metadata(cl *kgo.Client) (*kmsg.MetadataResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
}

// dialSASL is a raw connection to the SASL listener.
func (sts *saslTestServer) dialSASL(t *testing.T) *rawConn {
	t.Helper()
	rc := sts.dial(t)
	rc.nc.Close()
	nc, err := net.Dial("tcp", sts.saslAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	rc.nc, rc.r = nc, bufio.NewReader(nc)
	return rc
}

// authenticatePlain runs SaslHandshake v1 and SaslAuthenticate (at
// version v) with PLAIN.
func (rc *rawConn) authenticatePlain(user, password string, v int16) *kmsg.SASLAuthenticateResponse {
	rc.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	if resp := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		rc.t.Fatalf("handshake: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version = v
	auth.SASLAuthBytes = []byte("\x00" + user + "\x00" + password)
	return rc.roundTrip(auth).(*kmsg.SASLAuthenticateResponse)
}

// TestSASLMechanismsWithFranzGo: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
// log in and then produce and consume; the data is the PLAINTEXT
// listener's.
func TestSASLMechanismsWithFranzGo(t *testing.T) {
	sts := startSASLServer(t, nil)
	sts.createTopic(t, "secured", 1, nil)
	for _, m := range []sasl.Mechanism{
		plain.Auth{User: "alice", Pass: alicePassword}.AsMechanism(),
		scram.Auth{User: "alice", Pass: alicePassword}.AsSha256Mechanism(),
		scram.Auth{User: "bob", Pass: bobPassword}.AsSha512Mechanism(),
	} {
		cl := sts.saslClient(t, m)
		produceSync(t, cl, "secured", 0, m.Name())
	}
	recs := consume(t, sts.testServer, "secured", 3)
	for i, want := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		if string(recs[i].Value) != want {
			t.Fatalf("record %d is %q, want %q", i, recs[i].Value, want)
		}
	}
}

// TestSASLRefusesWrongPasswordsAndUnknownUsers: each gets
// SASL_AUTHENTICATION_FAILED with Kafka's text, which does not tell an
// unknown user from a wrong password, and the connection closes.
func TestSASLRefusesWrongPasswordsAndUnknownUsers(t *testing.T) {
	sts := startSASLServer(t, nil)
	for _, c := range []struct {
		mech sasl.Mechanism
		text string
	}{
		{plain.Auth{User: "alice", Pass: wrongPassword}.AsMechanism(), "Authentication failed: Invalid username or password"},
		{plain.Auth{User: "mallory", Pass: wrongPassword}.AsMechanism(), "Authentication failed: Invalid username or password"},
		{scram.Auth{User: "alice", Pass: wrongPassword}.AsSha256Mechanism(), "invalid credentials with SASL mechanism SCRAM-SHA-256"},
		{scram.Auth{User: "mallory", Pass: wrongPassword}.AsSha512Mechanism(), "invalid credentials with SASL mechanism SCRAM-SHA-512"},
	} {
		_, err := metadata(sts.saslClient(t, c.mech))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED saying %q", c.mech.Name(), err, c.text)
		}
	}
	rc := sts.dialSASL(t)
	if resp := rc.authenticatePlain("alice", wrongPassword, 1); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("wrong password: error %d", resp.ErrorCode)
	}
	rc.expectClosed()
	if !sts.logs.contains("failed authentication") || !sts.logs.contains("user=mallory") {
		t.Fatalf("failed logins were not logged:\n%s", sts.logs)
	}
}

// TestSASLListenerRefusesRequestsBeforeAuthentication: only ApiVersions
// and the SASL requests are served before a login; anything else closes
// the connection, as Kafka does, and so does a request larger than
// Kafka's sasl.server.max.receive.size.
func TestSASLListenerRefusesRequestsBeforeAuthentication(t *testing.T) {
	sts := startSASLServer(t, nil)
	rc := sts.dialSASL(t)
	if resp := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions: %d", resp.ErrorCode)
	}
	rc.send(kmsg.NewPtrMetadataRequest())
	rc.expectClosed()

	rc = sts.dialSASL(t)
	rc.write([]byte{0, 0x10, 0, 0}) // a 1 MiB frame announced
	rc.expectClosed()

	// The same request on the PLAINTEXT listener is served.
	if resp := sts.dial(t).roundTrip(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
		t.Fatal("PLAINTEXT listener: no broker in Metadata")
	}
	// On the PLAINTEXT listener the SASL requests are ILLEGAL_SASL_STATE.
	plainConn := sts.dial(t)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	if resp := plainConn.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake on PLAINTEXT: error %d", resp.ErrorCode)
	}
}

// TestSASLUnsupportedMechanism lists what is supported and closes.
func TestSASLUnsupportedMechanism(t *testing.T) {
	sts := startSASLServer(t, nil)
	rc := sts.dialSASL(t)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	resp := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(resp.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("GSSAPI: %+v", resp)
	}
	rc.expectClosed()
}

// TestSaramaPlainWithBothHandshakeVersions: sarama with SASL PLAIN, over
// SaslAuthenticate (handshake v1) and over bare frames (handshake v0, as
// clients before Kafka 1.0 do).
func TestSaramaPlainWithBothHandshakeVersions(t *testing.T) {
	sts := startSASLServer(t, nil)
	for _, v := range []int16{sarama.SASLHandshakeV0, sarama.SASLHandshakeV1} {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		cfg.Net.SASL.Version = v
		cfg.ApiVersionsRequest = v != sarama.SASLHandshakeV0 // sarama refuses both together
		cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", alicePassword
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		producer, err := sarama.NewSyncProducer([]string{sts.saslAddr}, cfg)
		if err != nil {
			t.Fatalf("handshake v%d: %v", v, err)
		}
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "sarama-sasl", Value: sarama.StringEncoder("hi")}); err != nil {
			t.Fatalf("handshake v%d: produce: %v", v, err)
		}
		producer.Close()

		cfg.Net.SASL.Password = wrongPassword
		if _, err := sarama.NewSyncProducer([]string{sts.saslAddr}, cfg); err == nil {
			t.Fatalf("handshake v%d: a wrong password was accepted", v)
		}
	}
}

// TestSASLSessionLifetimeAndReauthentication (KIP-368): SaslAuthenticate
// v1+ tells the client its session's lifetime; past it, a request that
// is not a re-authentication closes the connection, while a connection
// that re-authenticates goes on. Re-authenticating as someone else fails.
func TestSASLSessionLifetimeAndReauthentication(t *testing.T) {
	const lifetime = 300 * time.Millisecond
	sts := startSASLServer(t, func(s *Server) { s.cfg.SASLSessionLifetime = lifetime })

	expired := sts.dialSASL(t)
	// Taken before the request: the session starts when the server
	// answers, later, so the time measured is never short of it.
	start := time.Now()
	resp := expired.authenticatePlain("alice", alicePassword, 1)
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("authenticate: error %d, session lifetime %d ms", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
	renewed := sts.dialSASL(t)
	renewed.authenticatePlain("alice", alicePassword, 2)
	// Metadata is served until the session expires; then the
	// connection closes.
	for {
		expired.send(kmsg.NewPtrMetadataRequest())
		if _, err := expired.readFrame(); err != nil {
			break
		} else if time.Since(start) > 10*time.Second {
			t.Fatal("the connection outlived its session")
		}
	}
	if time.Since(start) < lifetime-50*time.Millisecond {
		t.Fatalf("the session ended after %v, before its lifetime %v", time.Since(start), lifetime)
	}
	// The session of renewed has expired too: re-authenticating
	// restores it.
	if resp := renewed.authenticatePlain("alice", alicePassword, 2); resp.ErrorCode != 0 {
		t.Fatalf("re-authentication: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp := renewed.roundTrip(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
		t.Fatal("no Metadata after re-authentication")
	}
	resp = renewed.authenticatePlain("bob", bobPassword, 2)
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || !strings.Contains(*resp.ErrorMessage, "Cannot change principals during re-authentication from User.alice: User.bob") {
		t.Fatalf("re-authentication as bob: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	renewed.expectClosed()
}

// TestFranzGoReauthenticates: franz-go re-authenticates by itself before
// its session ends, and keeps producing across several lifetimes.
func TestFranzGoReauthenticates(t *testing.T) {
	sts := startSASLServer(t, func(s *Server) { s.cfg.SASLSessionLifetime = time.Second })
	cl := sts.saslClient(t, scram.Auth{User: "alice", Pass: alicePassword}.AsSha512Mechanism(), kgo.RequestRetries(3))
	sts.createTopic(t, "reauth", 1, nil)
	deadline := time.Now().Add(3 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		produceSync(t, cl, "reauth", 0, "x")
	}
	if !sts.logs.contains("re-authenticated") || sts.logs.contains("expired") {
		t.Fatalf("franz-go did not re-authenticate in time:\n%s", sts.logs)
	}
}

// TestGuestOnlyFromLoopback: guest logs in over loopback but not from
// another address (a pipe stands for one here).
func TestGuestOnlyFromLoopback(t *testing.T) {
	sts := startSASLServer(t, nil)
	if _, err := metadata(sts.saslClient(t, plain.Auth{User: "guest", Pass: "guest"}.AsMechanism())); err != nil {
		t.Fatalf("guest over loopback: %v", err)
	}
	server, client := net.Pipe()
	defer client.Close()
	l := Listener{Protocol: SASLPlaintext}
	done := make(chan struct{})
	go func() {
		defer close(done)
		newConn(sts.s, server, &l).serve()
	}()
	rc := &rawConn{t: t, nc: client, r: bufio.NewReader(client)}
	resp := rc.authenticatePlain("guest", "guest", 1)
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || *resp.ErrorMessage != "Authentication failed: Invalid username or password" {
		t.Fatalf("guest from a remote address: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	<-done
	if !sts.logs.contains("user guest can only log in from localhost") {
		t.Fatalf("the refusal's reason was not logged:\n%s", sts.logs)
	}
}

// TestFailedLoginsAreCountedPerAddress: a failure makes the limiter hold
// up the next attempt from that address; a success clears it.
func TestFailedLoginsAreCountedPerAddress(t *testing.T) {
	limiter := authlimit.New(authlimit.Config{FreeFailures: 1, BaseDelay: time.Hour})
	sts := startSASLServer(t, func(s *Server) { s.cfg.LoginLimiter = limiter })
	waits := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		return limiter.Wait(ctx, "127.0.0.1") != nil
	}
	sts.dialSASL(t).authenticatePlain("alice", wrongPassword, 1)
	if !waits() {
		t.Fatal("a failed login from 127.0.0.1 was not counted")
	}
	limiter.Succeeded("127.0.0.1")
	sts.dialSASL(t).authenticatePlain("alice", alicePassword, 1)
	if waits() {
		t.Fatal("a successful login did not clear the address")
	}
}

// TestScramCredentialsThroughKadm: AlterUserScramCredentials creates a
// user that can then log in with SCRAM; Describe shows mechanisms and
// iterations; Kafka's validation rules apply.
func TestScramCredentialsThroughKadm(t *testing.T) {
	sts := startSASLServer(t, nil)
	adm := kadm.NewClient(sts.client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "carol-256"},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("upsert: %v %v", err, altered.Error())
	}
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-512"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := metadata(sts.saslClient(t, scram.Auth{User: "carol", Pass: "carol-256"}.AsSha256Mechanism())); err != nil {
		t.Fatalf("carol with SCRAM-SHA-256: %v", err)
	}
	if _, err := metadata(sts.saslClient(t, scram.Auth{User: "carol", Pass: "carol-512"}.AsSha512Mechanism())); err != nil {
		t.Fatalf("carol with SCRAM-SHA-512: %v", err)
	}

	described, err := adm.DescribeUserSCRAMs(ctx, "carol", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	carol := described["carol"]
	if carol.Err != nil || len(carol.CredInfos) != 2 || carol.CredInfos[0].Iterations != 8192 || carol.CredInfos[1].Mechanism != kadm.ScramSha512 {
		t.Fatalf("carol described as %+v", carol)
	}
	if !errors.Is(described["nobody"].Err, kerr.ResourceNotFound) {
		t.Fatalf("nobody: %v", described["nobody"].Err)
	}
	all, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || len(all) != len(testUsers)+1 { // and carol
		t.Fatalf("all users: %v, %v", all, err)
	}

	// Kafka's validation, answered per user.
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	upsert := func(name string, mech int8, iterations int32) {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iterations, []byte("salt"), make([]byte, 32)
		req.Upsertions = append(req.Upsertions, u)
	}
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "twice", 1
	req.Deletions = append(req.Deletions, del)
	del.Name = "ghost"
	req.Deletions = append(req.Deletions, del)
	upsert("twice", 2, 4096)
	upsert("few", 1, 1000)
	upsert("many", 1, 20000)
	upsert("", 1, 4096)
	upsert("badmech", 3, 4096)
	resp, err := req.RequestWith(ctx, sts.client(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*kerr.Error{
		"twice": kerr.DuplicateResource, "ghost": kerr.ResourceNotFound, "few": kerr.UnacceptableCredential,
		"many": kerr.UnacceptableCredential, "": kerr.UnacceptableCredential, "badmech": kerr.UnsupportedSaslMechanism,
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(resp.Results), len(want), resp.Results)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != want[r.User].Code {
			t.Errorf("%q: %v, want %v", r.User, kerr.ErrorForCode(r.ErrorCode), want[r.User])
		}
	}
}

// logCapture keeps a server's log lines.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logCapture) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Contains(l.buf.Bytes(), []byte(s))
}

func (l *logCapture) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// teeHandler sends records to next and, as text, to a logCapture.
type teeHandler struct {
	next  slog.Handler
	logs  *logCapture
	attrs []slog.Attr
}

func (h teeHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	captured := r.Clone()
	captured.AddAttrs(h.attrs...)
	h.logs.mu.Lock()
	err := slog.NewTextHandler(&h.logs.buf, &slog.HandlerOptions{Level: slog.LevelDebug}).Handle(ctx, captured)
	h.logs.mu.Unlock()
	if err != nil {
		return err
	}
	return h.next.Handle(ctx, r)
}

func (h teeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return teeHandler{h.next.WithAttrs(attrs), h.logs, append(slices.Clone(h.attrs), attrs...)}
}

func (h teeHandler) WithGroup(name string) slog.Handler {
	return teeHandler{h.next.WithGroup(name), h.logs, h.attrs}
}

// cutOffDefinitions is a node's definition store cut off from the
// metadata quorum: a barrier (the catch-up of a lookup that misses)
// waits until its caller's context ends, or for the metadata write
// timeout, as the broker's does there. It counts the barriers.
type cutOffDefinitions struct {
	*broker.DefinitionStore
	barriers atomic.Int64
}

func (d *cutOffDefinitions) BarrierContext(ctx context.Context) error {
	d.barriers.Add(1)
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(30 * time.Second):
		return errors.New("metadata write timed out")
	}
}

// TestCutOffNodeRefusesUnknownUserInTime: on a node cut off from the
// metadata quorum, a SASL login as a user the node does not know (or,
// with PLAIN, with a password that does not match) gets Kafka's
// SASL_AUTHENTICATION_FAILED once the lookup's bound runs out, not when
// the catch-up gives up (30 s), past franz-go's own timeout, where it
// reports an i/o timeout instead; DescribeUserScramCredentials of such
// users is RESOURCE_NOT_FOUND in the same time; a user the node knows
// logs in, and is described, without waiting for the cluster at all.
func TestCutOffNodeRefusesUnknownUserInTime(t *testing.T) {
	const wait = 500 * time.Millisecond
	var defs *cutOffDefinitions
	sts := startSASLServer(t, func(s *Server) {
		defs = &cutOffDefinitions{DefinitionStore: s.broker.Definitions()}
		store, err := users.Open(defs) // follows the users startSASLServer made
		if err != nil {
			t.Fatal(err)
		}
		s.cfg.Users = store
		s.userLookupWait = wait
	})
	for _, c := range []struct {
		mech sasl.Mechanism
		text string
	}{
		{plain.Auth{User: "mallory", Pass: wrongPassword}.AsMechanism(), plainInvalidMessage},
		{plain.Auth{User: "alice", Pass: wrongPassword}.AsMechanism(), plainInvalidMessage},
		{scram.Auth{User: "mallory", Pass: wrongPassword}.AsSha256Mechanism(), "invalid credentials with SASL mechanism SCRAM-SHA-256"},
		{scram.Auth{User: "mallory", Pass: wrongPassword}.AsSha512Mechanism(), "invalid credentials with SASL mechanism SCRAM-SHA-512"},
	} {
		start := time.Now()
		_, err := metadata(sts.saslClient(t, c.mech))
		took := time.Since(start)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s on a cut-off node: %v after %v, want SASL_AUTHENTICATION_FAILED saying %q", c.mech.Name(), err, took, c.text)
		}
		// A loaded machine gets room, but far less than the catch-up's
		// own bound.
		if took > wait+3*time.Second {
			t.Errorf("%s on a cut-off node was refused after %v, want about %v", c.mech.Name(), took, wait)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	described, err := kadm.NewClient(sts.client(t)).DescribeUserSCRAMs(ctx, "mallory", "eve")
	took := time.Since(start)
	if err != nil || !errors.Is(described["mallory"].Err, kerr.ResourceNotFound) || !errors.Is(described["eve"].Err, kerr.ResourceNotFound) {
		t.Errorf("DescribeUserScramCredentials of users a cut-off node does not know: %v, %v after %v, want RESOURCE_NOT_FOUND each", described, err, took)
	}
	if took > wait+3*time.Second { // the two share one wait
		t.Errorf("DescribeUserScramCredentials on a cut-off node answered after %v, want about %v", took, wait)
	}

	before := defs.barriers.Load()
	for _, m := range []sasl.Mechanism{
		plain.Auth{User: "alice", Pass: alicePassword}.AsMechanism(),
		scram.Auth{User: "alice", Pass: alicePassword}.AsSha256Mechanism(),
		scram.Auth{User: "bob", Pass: bobPassword}.AsSha512Mechanism(),
	} {
		if _, err := metadata(sts.saslClient(t, m)); err != nil {
			t.Errorf("%s as a user the cut-off node knows: %v", m.Name(), err)
		}
	}
	if described, err := kadm.NewClient(sts.client(t)).DescribeUserSCRAMs(ctx, "alice"); err != nil || described["alice"].Err != nil {
		t.Errorf("DescribeUserScramCredentials of a user the cut-off node knows: %v, %v", described, err)
	}
	if n := defs.barriers.Load() - before; n != 0 {
		t.Errorf("logins and descriptions of users the node knows waited for the cluster %d times, want none", n)
	}
}
