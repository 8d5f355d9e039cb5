package users

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/wharf-mq/wharf/internal/kvtest"
)

func mustOpen(t *testing.T, kv KV) *Store {
	t.Helper()
	s, err := Open(kv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCredentialProvesRFC7677Exchange checks the derivation against the
// SCRAM-SHA-256 exchange of RFC 7677 section 3: the stored credential must
// accept the client's proof and produce the server's signature.
func TestCredentialProvesRFC7677Exchange(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := SaltedPassword(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CredentialFromSalted(ScramSHA256, salt, salted, 4096)
	if err != nil {
		t.Fatal(err)
	}
	auth := "n=user,r=rOprNGfwEbeRWgbNEkqO," +
		"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096," +
		"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	proof, _ := base64.StdEncoding.DecodeString("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	signature := HMAC(sha256.New, c.StoredKey, []byte(auth))
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ signature[i]
	}
	if got := sha256.Sum256(clientKey); !bytes.Equal(got[:], c.StoredKey) {
		t.Fatal("the stored key does not accept RFC 7677's client proof")
	}
	want, _ := base64.StdEncoding.DecodeString("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
	if got := HMAC(sha256.New, c.ServerKey, []byte(auth)); !bytes.Equal(got, want) {
		t.Fatal("the server key does not give RFC 7677's server signature")
	}
	if !c.Matches(ScramSHA256, "pencil") || c.Matches(ScramSHA256, "pencil ") {
		t.Fatal("Matches does not tell the password from another")
	}
}

func TestUsersSurviveReopenWithoutPasswords(t *testing.T) {
	kv := kvtest.New()
	s := mustOpen(t, kv)
	if err := s.Put("alice", "s3cret-pass", []string{"management", " administrator", "management"}); err != nil {
		t.Fatal(err)
	}
	kv.Load(func(key string, value []byte) error {
		if bytes.Contains(value, []byte("s3cret-pass")) || strings.Contains(key, "s3cret") {
			t.Fatalf("the password is stored in the clear under %q: %s", key, value)
		}
		return nil
	})
	s = mustOpen(t, kv)
	u, ok := s.Authenticate("alice", "s3cret-pass")
	if !ok {
		t.Fatal("alice cannot log in after a reopen")
	}
	if got := strings.Join(u.Tags, ","); got != "administrator,management" {
		t.Fatalf("tags %q, want sorted and without repeats", got)
	}
	if len(u.Credentials) != 2 {
		t.Fatalf("%d credentials, want one per SCRAM mechanism", len(u.Credentials))
	}
	for _, bad := range []struct{ user, pass string }{{"alice", "wrong"}, {"bob", "s3cret-pass"}, {"alice", ""}} {
		if _, ok := s.Authenticate(bad.user, bad.pass); ok {
			t.Fatalf("%s/%q logged in", bad.user, bad.pass)
		}
	}
}

// TestKafkaStyleCredentialsPerMechanism: AlterUserScramCredentials sets
// one mechanism at a time from a salted password, so the two mechanisms
// may hold different passwords, and deleting one leaves the other.
func TestKafkaStyleCredentialsPerMechanism(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	set := func(m Mechanism, password string) {
		t.Helper()
		salt := []byte("0123456789abcdef")
		salted, err := SaltedPassword(m, password, salt, 8192)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetCredential("adminscram", m, salt, salted, 8192); err != nil {
			t.Fatal(err)
		}
	}
	set(ScramSHA256, "admin-secret-256")
	set(ScramSHA512, "admin-secret-512")
	c256, _ := s.CredentialContext(context.Background(), "adminscram", ScramSHA256)
	c512, _ := s.CredentialContext(context.Background(), "adminscram", ScramSHA512)
	if !c256.Matches(ScramSHA256, "admin-secret-256") || !c512.Matches(ScramSHA512, "admin-secret-512") {
		t.Fatal("a mechanism's credential does not match its own password")
	}
	if c512.Matches(ScramSHA512, "admin-secret-256") {
		t.Fatal("SCRAM-SHA-512 accepts the SCRAM-SHA-256 password")
	}
	if err := s.DeleteCredential("adminscram", ScramSHA256); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.CredentialContext(context.Background(), "adminscram", ScramSHA256); ok {
		t.Fatal("SCRAM-SHA-256 credential still there after its deletion")
	}
	if _, ok := s.CredentialContext(context.Background(), "adminscram", ScramSHA512); !ok {
		t.Fatal("deleting SCRAM-SHA-256 removed SCRAM-SHA-512")
	}
	if err := s.DeleteCredential("adminscram", ScramSHA256); !errors.Is(err, ErrNoSuchUser) {
		t.Fatalf("deleting a missing credential: %v, want ErrNoSuchUser", err)
	}
	if err := s.SetCredential("x", ScramSHA256, []byte("salt"), make([]byte, 32), 1000); !errors.Is(err, ErrIterations) {
		t.Fatalf("1000 iterations: %v, want ErrIterations", err)
	}
	if err := s.SetCredential("x", "PLAIN", []byte("salt"), make([]byte, 32), 4096); !errors.Is(err, ErrNotMechanism) {
		t.Fatalf("PLAIN: %v, want ErrNotMechanism", err)
	}
}

func TestBootstrapCreatesGuestOnceAndTheAdministratorIfMissing(t *testing.T) {
	kv := kvtest.New()
	s := mustOpen(t, kv)
	if err := Bootstrap(s, "root", "first-password"); err != nil {
		t.Fatal(err)
	}
	if u, ok := s.Authenticate("guest", "guest"); !ok || !u.HasTag(TagAdministrator) {
		t.Fatal("a new node has no administrator guest/guest")
	}
	if u, ok := s.Authenticate("root", "first-password"); !ok || !u.HasTag(TagAdministrator) {
		t.Fatal("the bootstrap administrator was not created")
	}
	if err := s.SetPassword("root", "changed"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("guest"); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, kv)
	if err := Bootstrap(s, "root", "first-password"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("guest"); ok {
		t.Fatal("a deleted guest came back at a restart")
	}
	if _, ok := s.Authenticate("root", "changed"); !ok {
		t.Fatal("a restart reset the administrator's changed password")
	}
	if err := Bootstrap(s, "other", ""); err == nil {
		t.Fatal("an administrator without a password was accepted")
	}
}

// TestBootstrapLeavesAnEmptiedStoreEmpty: RabbitMQ creates guest on a new
// node only; a node whose users were all deleted used to get guest back
// at its next start.
func TestBootstrapLeavesAnEmptiedStoreEmpty(t *testing.T) {
	kv := kvtest.New()
	s := mustOpen(t, kv)
	if err := Bootstrap(s, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("guest"); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, kv)
	if err := Bootstrap(s, "", ""); err != nil {
		t.Fatal(err)
	}
	if !s.Empty() {
		t.Fatalf("a store emptied by its operator holds %d users after a restart", len(s.List()))
	}
}

// TestBootstrapTakesAStoreWithUsersAsInitialised: a store an older
// version bootstrapped holds users but no record of it; emptied later, it
// must not get guest back either.
func TestBootstrapTakesAStoreWithUsersAsInitialised(t *testing.T) {
	kv := kvtest.New()
	s := mustOpen(t, kv)
	if err := s.Put("alice", "secret", nil); err != nil {
		t.Fatal(err)
	}
	if err := Bootstrap(s, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("guest"); ok {
		t.Fatal("guest was created on a store that held users")
	}
	if err := s.Delete("alice"); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, kv)
	if err := Bootstrap(s, "", ""); err != nil {
		t.Fatal(err)
	}
	if !s.Empty() {
		t.Fatal("guest came back on a store that had held users")
	}
}

func TestNamesEveryProtocolCanCarry(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	for _, name := range []string{"", "a\x00b", "q\xff"} {
		if err := s.Put(name, "pw", nil); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Put(%q): %v, want ErrInvalidName", name, err)
		}
	}
	if err := s.Put("ok", "", nil); !errors.Is(err, ErrNoPassword) {
		t.Errorf("empty password: %v, want ErrNoPassword", err)
	}
	if err := s.SetTags("nobody", nil); !errors.Is(err, ErrNoSuchUser) {
		t.Errorf("SetTags of a missing user: %v", err)
	}
}

// TestStoresFollowEachOtherAsNodes: two stores over one metadata log (two
// nodes of a cluster, each applying the log at its own pace). A user made
// on one logs in on the other at once, by SCRAM and by plain password:
// a lookup that misses waits for the cluster. A changed password and a
// deleted user reach the other node as it applies the log; a Kafka
// credential added on a node that had not seen the user yet keeps what
// the user had.
func TestStoresFollowEachOtherAsNodes(t *testing.T) {
	log := kvtest.New()
	node1, node2 := log.Node(), log.Node()
	s1, s2 := mustOpen(t, node1), mustOpen(t, node2)

	if err := s1.Put("alice", "pass-1", []string{TagManagement}); err != nil {
		t.Fatal(err)
	}
	if err := runScram(t, s2, ScramSHA512, scram.Auth{User: "alice", Pass: "pass-1"}); err != nil {
		t.Fatalf("SCRAM on node 2 right after node 1 made alice: %v", err)
	}
	if err := s2.SetPassword("alice", "pass-2"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s1.Authenticate("alice", "pass-2"); !ok {
		t.Fatal("node 1 refuses the password node 2 just set")
	}
	if _, ok := s1.Authenticate("alice", "pass-1"); ok {
		t.Fatal("node 1 still takes the old password once it caught up")
	}

	if err := s1.Put("bob", "bob-pass", []string{TagMonitoring}); err != nil {
		t.Fatal(err)
	}
	salt := []byte("0123456789abcdef")
	salted, err := SaltedPassword(ScramSHA256, "bob-kafka", salt, MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.SetCredential("bob", ScramSHA256, salt, salted, MinIterations); err != nil {
		t.Fatal(err)
	}
	node1.CatchUp()
	bob, _ := s1.Get("bob")
	if !bob.HasTag(TagMonitoring) || len(bob.Credentials) != 2 {
		t.Fatalf("bob after node 2 set his SHA-256 credential: %+v, want his tag and both mechanisms", bob)
	}

	if err := s2.Delete("alice"); err != nil {
		t.Fatal(err)
	}
	node1.CatchUp() // as it applies the log
	if _, ok := s1.Authenticate("alice", "pass-2"); ok {
		t.Fatal("node 1 lets the deleted alice in")
	}
	if got := len(s1.List()); got != 1 {
		t.Fatalf("node 1 lists %d users, want bob alone", got)
	}
}

// cutOffNode is a node's view of the metadata log cut off from its
// quorum: a barrier waits until its caller's context ends.
type cutOffNode struct{ *kvtest.Node }

func (cutOffNode) BarrierContext(ctx context.Context) error {
	<-ctx.Done()
	return context.Cause(ctx)
}

// TestCutOffLookupsEndWithTheirContext: on a node cut off from the
// metadata quorum, a login and a lookup of a user the node does not
// know end when their context does (an AMQP handshake's deadline, Kafka
// SASL's bound), refused, rather than when a barrier gives up (30 s).
func TestCutOffLookupsEndWithTheirContext(t *testing.T) {
	s := mustOpen(t, cutOffNode{kvtest.New().Node()})
	for _, c := range []struct {
		what   string
		lookUp func(ctx context.Context) bool
	}{
		{"Login", func(ctx context.Context) bool {
			_, ok, err := s.Login(ctx, nil, "192.0.2.7:5000", "nobody", "pw")
			if err != nil {
				t.Errorf("Login: %v, want a refusal", err)
			}
			return ok
		}},
		{"GetContext", func(ctx context.Context) bool {
			_, ok := s.GetContext(ctx, "nobody")
			return ok
		}},
		{"LoginWithin", func(context.Context) bool { // its wait alone bounds it
			_, ok, err := s.LoginWithin(context.Background(), 50*time.Millisecond, nil, "192.0.2.7:5000", "nobody", "pw")
			if err != nil {
				t.Errorf("LoginWithin: %v, want a refusal", err)
			}
			return ok
		}},
		{"AuthenticateContext", func(ctx context.Context) bool {
			_, ok := s.AuthenticateContext(ctx, "nobody", "pw")
			return ok
		}},
		{"a SCRAM exchange's first step", func(ctx context.Context) bool {
			ex, err := s.NewScramExchange(ScramSHA256)
			if err != nil {
				t.Error(err)
				return false
			}
			if _, _, err := ex.Step(ctx, []byte("n,,n=nobody,r=abc")); err != nil {
				t.Errorf("first step for an unknown user: %v, want the decoy's salt", err)
			}
			return false // the proof decides, and no proof matches the decoy
		}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		done := make(chan bool, 1)
		go func() { done <- c.lookUp(ctx) }()
		select {
		case ok := <-done:
			if ok {
				t.Errorf("%s let in a user nobody made", c.what)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s of an unknown user on a cut-off node still waits 10 s after its context or wait ended", c.what)
		}
		cancel()
	}
}
