package users

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/kvtest"
)

// TestPasswordHashRoundTrip: a user's credentials go out as RFC 5803
// text without the password, and come back as credentials that accept
// the same password; other texts are refused.
func TestPasswordHashRoundTrip(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	if err := s.Put("alice", "s3cret-pass", []string{TagManagement}); err != nil {
		t.Fatal(err)
	}
	u, _ := s.Get("alice")
	hash := u.PasswordHash()
	if strings.Contains(hash, "s3cret") || !strings.HasPrefix(hash, "SCRAM-SHA-256$4096:") || !strings.Contains(hash, " SCRAM-SHA-512$4096:") {
		t.Fatalf("hash %q", hash)
	}
	creds, err := ParsePasswordHash(hash)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutCredentials("alice2", creds, u.Tags); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Authenticate("alice2", "s3cret-pass"); !ok {
		t.Fatal("imported credentials do not accept the password")
	}
	for _, bad := range []string{
		"PjpgqSV4Ev52rhEmCy4fZsgO+RNuoQzhhFdCIDznZVAH1qmS", // a RabbitMQ hash
		"SCRAM-SHA-1$4096:c2FsdA==$AAAA:AAAA",
		"SCRAM-SHA-256$10:c2FsdA==$" + strings.Repeat("A", 43) + "=:" + strings.Repeat("A", 43) + "=",
		"SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA",
		strings.Fields(hash)[0] + " " + strings.Fields(hash)[0],
	} {
		if _, err := ParsePasswordHash(bad); !errors.Is(err, ErrPasswordHash) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestPasswordlessUser: a user without credentials exists (for EXTERNAL)
// but no password logs it in, and its hash is empty.
func TestPasswordlessUser(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	if err := s.PutCredentials("cert-user", nil, nil); err != nil {
		t.Fatal(err)
	}
	u, ok := s.Get("cert-user")
	if !ok || u.PasswordHash() != "" {
		t.Fatalf("%+v %v", u, ok)
	}
	for _, pw := range []string{"", "x"} {
		if _, ok := s.Authenticate("cert-user", pw); ok {
			t.Fatalf("password %q logged a passwordless user in", pw)
		}
	}
}

// countingLimiter records what Login tells it.
type countingLimiter struct {
	waits, failed, succeeded int
	ips                      []string
}

func (l *countingLimiter) Wait(_ context.Context, ip string) error {
	l.waits++
	l.ips = append(l.ips, ip)
	return nil
}
func (l *countingLimiter) Failed(string)    { l.failed++ }
func (l *countingLimiter) Succeeded(string) { l.succeeded++ }

func TestLoginReportsToTheLimiter(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	if err := s.Put("bob", "pw", nil); err != nil {
		t.Fatal(err)
	}
	l := &countingLimiter{}
	for _, pw := range []string{"bad", "pw"} {
		if _, _, err := s.Login(context.Background(), l, "10.0.0.1:5672", "bob", pw); err != nil {
			t.Fatal(err)
		}
	}
	if l.waits != 2 || l.failed != 1 || l.succeeded != 1 || l.ips[0] != "10.0.0.1" {
		t.Fatalf("limiter saw %+v", *l)
	}
	if _, ok, _ := s.Login(context.Background(), nil, "10.0.0.1:5672", "bob", "pw"); !ok {
		t.Fatal("a login without a limiter failed")
	}
}
