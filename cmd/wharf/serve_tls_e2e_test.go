package main

import (
	"crypto/tls"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestServeReloadsTLSOnSIGHUP: `wharf serve` with a certificate binds
// AMQPS; after the files are renewed and SIGHUP sent, an established
// AMQPS connection goes on and a new one gets the new certificate.
func TestServeReloadsTLSOnSIGHUP(t *testing.T) {
	old := nodetest.NewPKI(t)
	s := startServer(t, wharfBinary(t), "--tls-cert", old.CertFile, "--tls-key", old.KeyFile, "--amqps-addr", "127.0.0.1:0", "--https-addr", "")
	addr := waitForLog(t, s, regexp.MustCompile(`amqps listener started" addr=(\S+)`))
	trusting := func(pki *nodetest.PKI) *tls.Config { return pki.ClientConfig("") }

	established, err := amqp.DialTLS("amqps://guest:guest@"+addr+"/", trusting(old))
	if err != nil {
		t.Fatal(err)
	}
	defer established.Close()
	renewed := nodetest.NewPKI(t)
	old.RenewWith(renewed)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, s, regexp.MustCompile(`(reloaded the TLS certificate on SIGHUP)`))

	ch, err := established.Channel()
	if err != nil {
		t.Fatalf("the established connection after the reload: %v", err)
	}
	ch.Close()
	if c, err := amqp.DialTLS("amqps://guest:guest@"+addr+"/", trusting(old)); err == nil {
		c.Close()
		t.Fatal("a new connection got the old certificate after SIGHUP")
	}
	fresh, err := amqp.DialTLS("amqps://guest:guest@"+addr+"/", trusting(renewed))
	if err != nil {
		t.Fatalf("a new connection after SIGHUP: %v", err)
	}
	fresh.Close()
	if err := s.stop(t); err != nil {
		t.Errorf("wharf serve after SIGTERM: %v", err)
	}
}

// waitForLog waits for a line of the server's log that re matches and
// returns its first group.
func waitForLog(t *testing.T, s *server, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for line := range strings.Lines(s.stderr.String()) {
			if m := re.FindStringSubmatch(line); m != nil {
				return m[1]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line matching %s:\n%s", re, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
