package main

import (
	"bufio"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// The passwords of the secured server's users; none may reach its
// output.
const (
	e2eAdminPassword = "adm1n-e2e-pass"
	e2eAlicePassword = "al1ce-e2e-pass"
)

// secureServe is `wharf serve` with PLAINTEXT and SASL_SSL listeners, the
// ACL authorizer on and admin as its super user.
type secureServe struct {
	cmd     *exec.Cmd
	plain   string // PLAINTEXT listener address
	saslSSL string // SASL_SSL listener address
	pki     *nodetest.PKI
	stdout  *lockedBuffer
	stderr  *lockedBuffer
	exited  chan struct{}
}

func startSecureServe(t *testing.T, dataDir string, pki *nodetest.PKI) *secureServe {
	t.Helper()
	s := &secureServe{pki: pki, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(wharfBinary(t), "serve", "--data-dir", dataDir,
		"--kafka-listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"--amqp-addr=", "--http-addr=", "--nats-addr=",
		"--tls-cert", pki.CertFile, "--tls-key", pki.KeyFile,
		"--kafka-authorizer", "--super-users", "User:admin", "--admin-user", "admin")
	// The administrator's password comes from the environment, as an
	// operator would keep it off the command line.
	s.cmd.Env = cleanEnv("WHARF_ADMIN_PASSWORD=" + e2eAdminPassword)
	s.cmd.Stderr = s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
	listening := regexp.MustCompile(`^Kafka listening on (\S+) \((\w+),`)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.stdout.Write([]byte(sc.Text() + "\n"))
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				if m[2] == "PLAINTEXT" {
					s.plain = m[1]
				} else {
					s.saslSSL = m[1]
				}
			}
			if strings.HasPrefix(sc.Text(), "Data directory") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-s.exited:
		t.Fatalf("wharf serve exited:\n%s", s.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("wharf serve did not start:\n%s", s.stderr.String())
	}
	return s
}

func (s *secureServe) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(40 * time.Second):
		t.Fatal("wharf serve did not stop")
	}
}

// as runs a client command as user over the SASL_SSL listener; the
// credentials and CA come through the environment.
func (s *secureServe) as(t *testing.T, user, password, stdin string, args ...string) result {
	t.Helper()
	return runWharf(t, stdin, []string{"WHARF_BOOTSTRAP_SERVER=" + s.saslSSL, "WHARF_USER=" + user,
		"WHARF_PASSWORD=" + password, "WHARF_TLS_CA=" + s.pki.CAFile}, args...)
}

// TestACLsThroughTheCLI: the administrator manages ACLs with wharf acls
// over SASL_SSL; alice may then produce but not consume (no READ) until
// granted; the ACLs survive a restart; no password reaches the broker's
// output.
func TestACLsThroughTheCLI(t *testing.T) {
	pki := nodetest.NewPKI(t)
	dataDir := t.TempDir()
	s := startSecureServe(t, dataDir, pki)

	// alice gets a SCRAM credential through AlterUserScramCredentials.
	admin, err := kgo.NewClient(kgo.SeedBrokers(s.saslSSL), kgo.DialTLSConfig(pki.ClientConfig("")),
		kgo.SASL(scram.Auth{User: "admin", Pass: e2eAdminPassword}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if res, err := kadm.NewClient(admin).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: e2eAlicePassword},
	}); err != nil || res.Error() != nil {
		t.Fatalf("create alice: %v %v", err, res.Error())
	}

	mustRun := func(r result) string {
		t.Helper()
		if r.status != 0 {
			t.Fatalf("status %d\nstdout: %s\nstderr: %s", r.status, r.stdout, r.stderr)
		}
		return r.stdout
	}
	mustRun(s.as(t, "admin", e2eAdminPassword, "", "topics", "create", "orders"))
	mustRun(s.as(t, "admin", e2eAdminPassword, "", "acls", "add", "--allow-principal", "User:alice",
		"--operation", "Write", "--operation", "Describe", "--topic", "orders"))
	mustRun(s.as(t, "alice", e2eAlicePassword, "one\ntwo\n", "produce", "orders"))

	denied := s.as(t, "alice", e2eAlicePassword, "", "consume", "orders", "--from-beginning", "--exit-at-end")
	if denied.status == 0 || !strings.Contains(denied.stderr, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("alice consuming without READ: status %d, stderr %q", denied.status, denied.stderr)
	}
	bad := s.as(t, "alice", "wrong-e2e-pass", "", "topics", "list")
	if bad.status == 0 || !strings.Contains(bad.stderr, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("a wrong password: status %d, stderr %q", bad.status, bad.stderr)
	}

	mustRun(s.as(t, "admin", e2eAdminPassword, "", "acls", "add", "--allow-principal", "User:alice",
		"--operation", "Read", "--topic", "ord", "--resource-pattern-type", "prefixed"))
	if got := mustRun(s.as(t, "alice", e2eAlicePassword, "", "consume", "orders", "--from-beginning", "--exit-at-end")); got != "one\ntwo\n" {
		t.Fatalf("alice read %q", got)
	}

	s.stop(t)
	s = startSecureServe(t, dataDir, pki)
	listed := mustRun(s.as(t, "admin", e2eAdminPassword, "", "acls", "list", "--principal", "User:alice"))
	for _, want := range []string{"TOPIC     orders  LITERAL   User:alice  *     WRITE", "TOPIC     ord     PREFIXED  User:alice  *     READ"} {
		if !strings.Contains(listed, want) {
			t.Fatalf("after a restart, acls list lacks %q:\n%s", want, listed)
		}
	}
	removed := mustRun(s.as(t, "admin", e2eAdminPassword, "", "acls", "remove", "--topic", "orders"))
	if strings.Count(removed, "Removed") != 2 {
		t.Fatalf("remove printed:\n%s", removed)
	}

	for _, out := range []string{s.stdout.String(), s.stderr.String()} {
		for _, pw := range []string{e2eAdminPassword, e2eAlicePassword, "wrong-e2e-pass"} {
			if strings.Contains(out, pw) {
				t.Fatal("a password reached the broker's output")
			}
		}
	}
}

func TestACLsUsage(t *testing.T) {
	for _, c := range aclsCommands() {
		if status, stdout, stderr := runCLI("acls", c.name, "--help"); status != 0 || stderr != "" || !strings.Contains(stdout, "--allow-principal") {
			t.Errorf("acls %s --help: status %d, stderr %q", c.name, status, stderr)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"acls", "add", "--topic", "t"}, "--allow-principal or --deny-principal"},
		{[]string{"acls", "add", "--allow-principal", "User:a"}, "name a resource"},
		{[]string{"acls", "add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"}, `--operation "Fly"`},
		{[]string{"acls", "add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"}, "want literal or prefixed"},
		{[]string{"acls", "remove"}, "name a resource"},
		{[]string{"topics", "list", "--sasl-mechanism", "GSSAPI", "--user", "a"}, `--sasl-mechanism "GSSAPI"`},
		{[]string{"topics", "list", "--password", "x"}, "--password needs --user"},
		{[]string{"topics", "list", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
	} {
		if status, _, stderr := runCLI(c.args...); status != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("wharf %q: status %d, stderr %q; want status 2 and %q", c.args, status, stderr, c.want)
		}
	}
}
