package main

// End-to-end tests of the built binary: `wharf serve` in a child process and
// the client subcommands against it, as a user would run them.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	wharfBin  string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// wharfBinary builds cmd/wharf once per test run.
func wharfBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the wharf binary")
	}
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("go tool not found: %w", err)
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", "wharf-bin-"); buildErr != nil {
			return
		}
		wharfBin = filepath.Join(buildDir, "wharf")
		out, err := exec.Command(goTool, "build", "-o", wharfBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return wharfBin
}

// cleanEnv is the test process's environment without WHARF_* variables, so
// a developer's settings cannot change what the tests see.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefix) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// server is a `wharf serve` child process.
type server struct {
	cmd      *exec.Cmd
	addr     string // bound Kafka address
	amqpAddr string // bound AMQP address
	httpAddr string // bound HTTP API address
	natsAddr string // bound NATS address
	dataDir  string
	stderr   *lockedBuffer
	exited   chan struct{} // closed when the process has exited
	waitErr  error         // valid after exited is closed
}

// startServer runs `wharf serve` on 127.0.0.1:0, with extra flags, and
// waits for it to print its Kafka address. The data directory comes through
// WHARF_DATA_DIR, and a bogus WHARF_KAFKA_ADDR shows the --kafka-addr flag
// wins over it.
func startServer(t *testing.T, bin string, extra ...string) *server {
	t.Helper()
	s := &server{dataDir: t.TempDir(), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	args := []string{"serve", "--kafka-addr", "127.0.0.1:0", "--amqp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--nats-addr", "127.0.0.1:0", "--log-level", "debug"}
	s.cmd = exec.Command(bin, append(args, extra...)...)
	s.cmd.Env = cleanEnv("WHARF_DATA_DIR="+s.dataDir, "WHARF_KAFKA_ADDR=256.0.0.1:1")
	s.cmd.Stderr = s.stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrCh := make(chan [4]string, 1)
	var stdoutLines lockedBuffer
	go func() {
		// serve prints its listeners, then the data directory.
		listening := regexp.MustCompile(`^(Kafka|AMQP|HTTP management API|NATS) listening on (\S+)`)
		var addrs [4]string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(&stdoutLines, sc.Text())
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addrs[map[string]int{"Kafka": 0, "AMQP": 1, "HTTP management API": 2, "NATS": 3}[m[1]]] = m[2]
			}
			if strings.HasPrefix(sc.Text(), "Data directory") {
				addrCh <- addrs
			}
		}
	}()
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("wharf serve stdout:\n%s\nstderr:\n%s", stdoutLines.String(), s.stderr.String())
		}
	})
	select {
	case addrs := <-addrCh:
		s.addr, s.amqpAddr, s.httpAddr, s.natsAddr = addrs[0], addrs[1], addrs[2], addrs[3]
	case <-s.exited:
		t.Fatalf("wharf serve exited before listening: %v\n%s", s.waitErr, s.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("wharf serve did not report its address\n%s", s.stderr.String())
	}
	return s
}

// stop sends SIGTERM and returns the exit error (nil for status 0).
func (s *server) stop(t *testing.T) error {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
		return s.waitErr
	case <-time.After(40 * time.Second):
		t.Fatal("wharf serve did not exit within 40s of SIGTERM")
		return nil
	}
}

type result struct {
	stdout, stderr string
	status         int
}

// wharf runs a client subcommand against s with stdin, using the flag for the
// bootstrap address (useEnv=false) or WHARF_BOOTSTRAP_SERVER.
func (s *server) wharf(t *testing.T, stdin string, useEnv bool, args ...string) result {
	t.Helper()
	var env []string
	if useEnv {
		env = append(env, "WHARF_BOOTSTRAP_SERVER="+s.addr)
	} else {
		args = append(args, "--bootstrap-server", s.addr)
	}
	return runWharf(t, stdin, env, args...)
}

// runWharf runs the built binary with stdin, a clean environment plus env,
// and args, within a minute.
func runWharf(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, wharfBin, args...)
	cmd.Env = cleanEnv(env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		r.status = exitErr.ExitCode()
	default:
		t.Fatalf("wharf %q: %v", args, err)
	}
	return r
}

// mustWharf is wharf that requires exit status 0.
func (s *server) mustWharf(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := s.wharf(t, stdin, false, args...)
	if r.status != 0 {
		t.Fatalf("wharf %q: status %d\nstdout: %s\nstderr: %s", args, r.status, r.stdout, r.stderr)
	}
	return r.stdout
}

func TestServeTopicsProduceConsume(t *testing.T) {
	bin := wharfBinary(t)
	s := startServer(t, bin)

	// topics create / list / describe
	out := s.mustWharf(t, "", "topics", "create", "events", "--partitions", "2", "--config", "retention.ms=3600000")
	if !regexp.MustCompile(`(?m)^events\s+OK$`).MatchString(out) {
		t.Errorf("topics create output:\n%s", out)
	}
	s.mustWharf(t, "", "topics", "create", "single", "--partitions", "1")
	s.mustWharf(t, "", "topics", "create", "doomed")

	r := s.wharf(t, "", true, "topics", "list") // bootstrap address from the environment
	if r.status != 0 {
		t.Fatalf("topics list via WHARF_BOOTSTRAP_SERVER: status %d: %s", r.status, r.stderr)
	}
	for _, want := range []string{`(?m)^NAME\s+PARTITIONS\s+REPLICAS$`, `(?m)^events\s+2\s+1$`, `(?m)^single\s+1\s+1$`, `(?m)^doomed\s+1\s+1$`} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("topics list: no line matching %s in:\n%s", want, r.stdout)
		}
	}

	r = s.wharf(t, "", false, "topics", "create", "events")
	if r.status != 1 || !strings.Contains(r.stdout, "TOPIC_ALREADY_EXISTS") {
		t.Errorf("creating an existing topic: status %d, stdout %q", r.status, r.stdout)
	}

	// produce: unkeyed and key<TAB>value lines, then more lines to partition 1.
	s.mustWharf(t, "plain\nk1\tv1\nk2\tv2\n", "produce", "events")
	s.mustWharf(t, "p1a\np1b\n", "produce", "events", "--partition", "1", "--acks", "1")
	r = s.wharf(t, "a\nb\nc\n", false, "produce", "single", "-v")
	if r.status != 0 || r.stdout != "" || !strings.Contains(r.stderr, "produced 3 records") {
		t.Errorf("produce -v: status %d stdout %q stderr %q", r.status, r.stdout, r.stderr)
	}

	// describe: configs and per-partition offsets.
	out = s.mustWharf(t, "", "topics", "describe", "events")
	if !regexp.MustCompile(`(?m)^retention\.ms\s+3600000\s+DYNAMIC_TOPIC_CONFIG$`).MatchString(out) {
		t.Errorf("describe does not show the retention.ms override:\n%s", out)
	}
	hw := highWatermarks(t, out)
	if len(hw) != 2 || hw[0]+hw[1] != 5 || hw[1] < 2 {
		t.Errorf("high watermarks %v, want 2 partitions holding 5 records, at least 2 in partition 1:\n%s", hw, out)
	}

	// consume everything from the beginning, with keys.
	out = s.mustWharf(t, "", "consume", "events", "--from-beginning", "--num", "5", "--format", `%k=%v\n`)
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	slices.Sort(got)
	if want := []string{"=p1a", "=p1b", "=plain", "k1=v1", "k2=v2"}; !slices.Equal(got, want) {
		t.Errorf("consumed %q, want %q (any order)", got, want)
	}

	// consume one partition from an offset, with every field.
	out = s.mustWharf(t, "", "consume", "single", "--partition", "0", "--offset", "1", "--num", "2", "--format", `%t/%p/%o:%v %T\n`)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "single/0/1:b ") || !strings.HasPrefix(lines[1], "single/0/2:c ") {
		t.Fatalf("consume --offset 1: %q", lines)
	}
	ts, err := strconv.ParseInt(strings.Fields(lines[0])[1], 10, 64)
	if err != nil || time.Since(time.UnixMilli(ts)).Abs() > time.Hour {
		t.Errorf("%%T = %q, want a recent timestamp in milliseconds", strings.Fields(lines[0])[1])
	}

	// alter: set and delete configs, grow partitions.
	out = s.mustWharf(t, "", "topics", "alter", "events", "--config", "retention.ms=1000", "--config", "cleanup.policy=delete", "--partitions", "3")
	if strings.Count(out, "OK") != 2 {
		t.Errorf("topics alter output:\n%s", out)
	}
	out = s.mustWharf(t, "", "topics", "describe", "events")
	if !regexp.MustCompile(`(?m)^retention\.ms\s+1000\s`).MatchString(out) || len(highWatermarks(t, out)) != 3 {
		t.Errorf("after alter, describe shows:\n%s", out)
	}
	s.mustWharf(t, "", "topics", "alter", "events", "--delete-config", "retention.ms")
	out = s.mustWharf(t, "", "topics", "describe", "events")
	if regexp.MustCompile(`(?m)^retention\.ms\s+1000\s`).MatchString(out) {
		t.Errorf("retention.ms override still shown after --delete-config:\n%s", out)
	}

	// delete
	out = s.mustWharf(t, "", "topics", "delete", "doomed")
	if !regexp.MustCompile(`(?m)^doomed\s+OK$`).MatchString(out) {
		t.Errorf("topics delete output:\n%s", out)
	}
	if out := s.mustWharf(t, "", "topics", "list"); strings.Contains(out, "doomed") {
		t.Errorf("deleted topic still listed:\n%s", out)
	}
	r = s.wharf(t, "", false, "topics", "describe", "doomed")
	if r.status != 1 || !strings.Contains(r.stderr, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("describe of a deleted topic: status %d, stderr %q", r.status, r.stderr)
	}

	// SIGTERM: clean exit and a clean-shutdown marker in every log directory.
	if err := s.stop(t); err != nil {
		t.Fatalf("wharf serve after SIGTERM: %v (want exit status 0)", err)
	}
	logDirs := logDirectories(t, s.dataDir)
	if len(logDirs) < 4 { // events-0..2 and single-0, plus any metadata log
		t.Errorf("found %d log directories in %s, want at least 4: %q", len(logDirs), s.dataDir, logDirs)
	}
	for _, dir := range logDirs {
		if _, err := os.Stat(filepath.Join(dir, "clean-shutdown")); err != nil {
			t.Errorf("no clean-shutdown marker in %s: %v", dir, err)
		}
	}
}

func TestConsumeStartsAtEndByDefault(t *testing.T) {
	bin := wharfBinary(t)
	s := startServer(t, bin)
	s.mustWharf(t, "", "topics", "create", "tail", "--partitions", "1")
	s.mustWharf(t, "old1\nold2\n", "produce", "tail")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consumer := exec.CommandContext(ctx, bin, "consume", "tail", "--num", "1", "--bootstrap-server", s.addr)
	consumer.Env = cleanEnv()
	var out, errOut lockedBuffer
	consumer.Stdout, consumer.Stderr = &out, &errOut
	if err := consumer.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- consumer.Wait() }()

	// The consumer's start position is fixed when it first asks for the end
	// offset, which the test cannot observe; so keep producing new records
	// until it prints one. Any old record in the output is the failure.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("consume: %v\n%s", err, errOut.String())
			}
			if got := out.String(); got != "new\n" {
				t.Errorf("consume without --from-beginning printed %q, want %q", got, "new\n")
			}
			return
		case <-tick.C:
			s.mustWharf(t, "new\n", "produce", "tail")
		case <-ctx.Done():
			t.Fatalf("consume did not exit: %s", errOut.String())
		}
	}
}

// highWatermarks parses the HIGH-WATERMARK column of `topics describe`.
func highWatermarks(t *testing.T, describe string) []int64 {
	t.Helper()
	_, parts, ok := strings.Cut(describe, "PARTITIONS\n==========\n")
	if !ok {
		t.Fatalf("no PARTITIONS section in:\n%s", describe)
	}
	var hws []int64
	for _, line := range strings.Split(strings.TrimSpace(parts), "\n")[1:] { // skip the header
		fields := strings.Fields(line)
		hw, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
		if err != nil {
			t.Fatalf("bad partition line %q", line)
		}
		hws = append(hws, hw)
	}
	return hws
}

// logDirectories lists the directories under root that hold segment files.
func logDirectories(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".log") {
			seen[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for dir := range seen {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	return dirs
}

// lockedBuffer is a bytes.Buffer safe for a child process's output copier
// and the test goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
