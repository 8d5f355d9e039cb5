package users

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/wharf-mq/wharf/internal/kvtest"
)

// runScram drives an exchange with franz-go's SCRAM client, as a Kafka
// client would.
func runScram(t *testing.T, s *Store, m Mechanism, auth scram.Auth) error {
	t.Helper()
	var mech sasl.Mechanism = auth.AsSha256Mechanism()
	if m == ScramSHA512 {
		mech = auth.AsSha512Mechanism()
	}
	session, msg, err := mech.Authenticate(context.Background(), "wharf")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := s.NewScramExchange(m)
	if err != nil {
		t.Fatal(err)
	}
	for {
		answer, done, err := ex.Step(context.Background(), msg)
		if err != nil {
			return err
		}
		clientDone, next, err := session.Challenge(answer)
		if err != nil {
			t.Fatalf("the client refused the server's answer: %v", err)
		}
		if done {
			if !clientDone {
				t.Fatal("the server finished before the client")
			}
			if ex.User() != auth.User {
				t.Fatalf("exchange authenticated %q, want %q", ex.User(), auth.User)
			}
			return nil
		}
		msg = next
	}
}

func TestScramExchangeWithAKafkaClient(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	if err := s.Put("alice", "pencil", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("a,b=c", "escaped", nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range Mechanisms {
		if err := runScram(t, s, m, scram.Auth{User: "alice", Pass: "pencil"}); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if err := runScram(t, s, m, scram.Auth{User: "a,b=c", Pass: "escaped"}); err != nil {
			t.Fatalf("%s with a name to escape: %v", m, err)
		}
		for _, bad := range []scram.Auth{{User: "alice", Pass: "wrong"}, {User: "nobody", Pass: "pencil"}} {
			if err := runScram(t, s, m, bad); !errors.Is(err, ErrBadCredentials) {
				t.Fatalf("%s as %s/%s: %v, want ErrBadCredentials", m, bad.User, bad.Pass, err)
			}
		}
		if err := runScram(t, s, m, scram.Auth{User: "alice", Pass: "pencil", Zid: "root"}); !errors.Is(err, ErrAuthzid) {
			t.Fatalf("%s acting as another user: %v", m, err)
		}
		if err := runScram(t, s, m, scram.Auth{User: "alice", Pass: "pencil", IsToken: true}); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("%s with a delegation token: %v", m, err)
		}
	}
}

// TestScramUnknownUserLooksLikeAKnownOne: the server-first message for a
// name that does not exist is as plausible, and as stable, as one for a
// user that does.
func TestScramUnknownUserLooksLikeAKnownOne(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	first := func(user string) string {
		ex, _ := s.NewScramExchange(ScramSHA256)
		answer, _, err := ex.Step(context.Background(), []byte("n,,n="+user+",r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		_, saltAndIterations, _ := strings.Cut(string(answer), ",s=")
		return saltAndIterations
	}
	a, b := first("ghost"), first("ghost")
	if a != b || !strings.HasSuffix(a, ",i=4096") || first("other") == a {
		t.Fatalf("decoy salts: %q, %q", a, b)
	}
}

func TestScramMalformedMessages(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	for _, msg := range []string{"", "n", "x,,n=a,r=b", "n,,r=b", "n,,n=a", "n,,n=a=zz,r=b", "n,b=x,n=a,r=b"} {
		ex, _ := s.NewScramExchange(ScramSHA512)
		if _, _, err := ex.Step(context.Background(), []byte(msg)); !errors.Is(err, ErrMalformed) {
			t.Errorf("client-first %q: %v, want ErrMalformed", msg, err)
		}
	}
	ex, _ := s.NewScramExchange(ScramSHA256)
	if _, _, err := ex.Step(context.Background(), []byte("p=tls-unique,,n=a,r=b")); !errors.Is(err, ErrUnsupported) {
		t.Errorf("channel binding: %v", err)
	}
	ex, _ = s.NewScramExchange(ScramSHA256)
	ex.Step(context.Background(), []byte("n,,n=a,r=b"))
	for _, msg := range []string{"c=biws,r=wrong,p=AAAA", "c=biws,r=b"} {
		if _, _, err := ex.Step(context.Background(), []byte(msg)); !errors.Is(err, ErrMalformed) {
			t.Errorf("client-final %q: %v, want ErrMalformed", msg, err)
		}
	}
	if _, err := s.NewScramExchange("PLAIN"); !errors.Is(err, ErrNotMechanism) {
		t.Errorf("PLAIN as a SCRAM mechanism: %v", err)
	}
}

func TestParsePlain(t *testing.T) {
	z, u, p, err := ParsePlain([]byte("\x00alice\x00pw\x00with nul"))
	if err != nil || z != "" || u != "alice" || p != "pw\x00with nul" {
		t.Fatalf("got %q %q %q %v", z, u, p, err)
	}
	if _, _, _, err := ParsePlain([]byte("alice\x00pw")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("two fields: %v", err)
	}
}
