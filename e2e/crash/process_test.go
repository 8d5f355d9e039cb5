package crash

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Limits for the broker process. Generous because the machine running the
// tests may be busy with other packages.
const (
	readyTimeout    = 20 * time.Second // from exec to the Kafka port accepting
	shutdownTimeout = 30 * time.Second // from SIGTERM to exit
	buildTimeout    = 5 * time.Minute
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string // removed by TestMain
)

// binFlag names a prebuilt wharf binary to test instead of building one,
// e.g. a deliberately broken build, to see that the checks catch it.
var binFlag = flag.String("crash.bin", "", "test this wharf binary instead of building ./cmd/wharf")

// wharfBinary builds ./cmd/wharf once per test binary and returns its path.
// The binary goes to a temporary directory, not the module, so a test run
// leaves the working tree untouched.
func wharfBinary(t *testing.T) string {
	t.Helper()
	if *binFlag != "" {
		return *binFlag
	}
	buildOnce.Do(func() {
		builtBin, buildErr = buildWharf()
	})
	if buildErr != nil {
		t.Fatalf("build wharf: %v", buildErr)
	}
	return builtBin
}

func buildWharf() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()

	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "wharf-crash-bin-")
	if err != nil {
		return "", err
	}
	buildDir = dir
	bin := filepath.Join(dir, "wharf")
	args := []string{"build", "-o", bin}
	if *raceBroker {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/wharf")
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// moduleRoot asks the go command where the main module lives, so the test
// works from any working directory.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, goTool(), "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m: %w", err)
	}
	root := strings.TrimSpace(string(out))
	if root == "" {
		return "", errors.New("go list -m printed no module directory")
	}
	return root, nil
}

// goTool is the go command that runs this test: $GOROOT/bin/go when go test
// set GOROOT, else whatever "go" is on PATH.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// broker is one running `wharf serve` child process.
type broker struct {
	t        *testing.T
	addr     string // Kafka listener, 127.0.0.1:port
	amqpAddr string // AMQP listener, 127.0.0.1:port; empty when not bound
	logPath  string // the process's stdout and stderr

	cmd     *exec.Cmd
	exited  chan struct{} // closed once Wait has returned
	waitErr error         // Wait's result; read only after exited is closed
}

// startBroker runs `wharf serve` on dataDir with its Kafka listener (and,
// withAMQP, its AMQP listener) on a free loopback port and returns once the
// ports accept connections. The process is killed at the end of the test if
// it still runs.
func startBroker(t *testing.T, bin, dataDir, logPath string, withAMQP bool) *broker {
	t.Helper()
	return startBrokerWithFileLimit(t, bin, dataDir, logPath, withAMQP, 0)
}

// startBrokerWithFileLimit is startBroker with the process's open-file
// limit (soft and hard) set to nofile first, through sh's ulimit; 0 keeps
// this process's limit.
func startBrokerWithFileLimit(t *testing.T, bin, dataDir, logPath string, withAMQP bool, nofile int) *broker {
	t.Helper()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("open broker log: %v", err)
	}
	defer logFile.Close() // the child has its own copy of the descriptor

	addr := freeLoopbackAddr(t)
	amqpAddr := ""
	if withAMQP {
		amqpAddr = freeLoopbackAddr(t)
	}
	args := []string{bin, "serve",
		"--data-dir", dataDir,
		"--kafka-addr", addr,
		"--amqp-addr=" + amqpAddr, // empty: no AMQP listener
		"--http-addr=",            // bind nothing else, so parallel runs cannot collide
		"--nats-addr=",
		"--log-level", "info",
	}
	if nofile > 0 {
		// exec keeps the pid, so kill and wait still reach the broker.
		args = append([]string{"sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$@"`, nofile), "sh"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = environWithoutWharf()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start wharf: %v", err)
	}
	b := &broker{t: t, addr: addr, amqpAddr: amqpAddr, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	// The waiter goroutine ends when the process does; Cleanup makes sure
	// that happens.
	go func() {
		b.waitErr = cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() {
		if b.running() {
			_ = b.cmd.Process.Kill()
			<-b.exited
		}
	})
	b.waitReady()
	return b
}

// waitReady polls the Kafka port, then the AMQP port if bound, until each
// accepts a connection, the process exits, or readyTimeout passes.
func (b *broker) waitReady() {
	b.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	b.waitAccepting(b.addr, deadline)
	if b.amqpAddr != "" {
		b.waitAccepting(b.amqpAddr, deadline)
	}
}

func (b *broker) waitAccepting(addr string, deadline time.Time) {
	b.t.Helper()
	retry := time.NewTicker(20 * time.Millisecond)
	defer retry.Stop()
	for {
		conn, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("wharf did not accept connections on %s within %v: %v\n%s", addr, readyTimeout, err, b.logTail())
		}
		select {
		case <-b.exited:
			b.t.Fatalf("wharf exited before accepting connections: %v\n%s", b.waitErr, b.logTail())
		case <-retry.C:
		}
	}
}

func (b *broker) running() bool {
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone. The process must
// still have been running: a broker that died on its own is a failure.
func (b *broker) kill() {
	b.t.Helper()
	if !b.running() {
		b.t.Fatalf("wharf exited before it was killed: %v\n%s", b.waitErr, b.logTail())
	}
	if err := b.cmd.Process.Kill(); err != nil {
		b.t.Fatalf("kill wharf: %v", err)
	}
	<-b.exited
	var exitErr *exec.ExitError
	if !errors.As(b.waitErr, &exitErr) {
		b.t.Fatalf("wharf after SIGKILL: want killed by signal, got %v", b.waitErr)
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		b.t.Fatalf("wharf after SIGKILL: want killed by SIGKILL, got %v\n%s", b.waitErr, b.logTail())
	}
}

// stop sends SIGTERM and requires a clean exit (status 0) within
// shutdownTimeout.
func (b *broker) stop() {
	b.t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.t.Fatalf("SIGTERM wharf: %v", err)
	}
	select {
	case <-b.exited:
	case <-time.After(shutdownTimeout):
		b.t.Fatalf("wharf did not exit within %v of SIGTERM\n%s", shutdownTimeout, b.logTail())
	}
	if b.waitErr != nil {
		b.t.Fatalf("wharf after SIGTERM: %v\n%s", b.waitErr, b.logTail())
	}
}

// checkNoRaceReport fails the test if the broker's log holds a race
// detector report (only possible with -crash.race).
func (b *broker) checkNoRaceReport() {
	b.t.Helper()
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		b.t.Fatalf("read broker log: %v", err)
	}
	if i := bytes.Index(data, []byte("WARNING: DATA RACE")); i >= 0 {
		b.t.Fatalf("race detector report in %s:\n%s", b.logPath, clip(data[i:], 8<<10))
	}
}

// logTail is the end of the broker's log, for failure messages.
func (b *broker) logTail() string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return fmt.Sprintf("(broker log unreadable: %v)", err)
	}
	const max = 4 << 10
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return "--- broker log tail (" + b.logPath + ") ---\n" + string(data)
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// freeLoopbackAddr returns a 127.0.0.1 address whose port was free a moment
// ago. Another process could take it before wharf binds it; startBroker then
// fails loudly rather than testing the wrong thing.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// environWithoutWharf is this process's environment minus WHARF_* variables,
// so a developer's shell settings cannot change the broker under test.
func environWithoutWharf() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WHARF_") {
			env = append(env, kv)
		}
	}
	return env
}
