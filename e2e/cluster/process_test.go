package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildWharf builds ./cmd/wharf once per test binary into a temporary
// directory.
var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// TestMain removes the binary the tests built, with its directory.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

func wharfBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
		if err != nil {
			buildErr = fmt.Errorf("go list -m: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "wharf-cluster-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "wharf")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", builtBin, "./cmd/wharf")
		cmd.Dir = strings.TrimSpace(string(out))
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// node is one `wharf serve` process of a test cluster.
type node struct {
	t           *testing.T
	id          int
	bin         string
	dataDir     string
	kafkaAddr   string
	clusterAddr string
	initial     string // --initial-cluster
	logPath     string
	// extraArgs go after the default flags of `wharf serve` (a later
	// flag wins): the AMQP tests give the nodes AMQP listeners.
	extraArgs []string
	// kafkaProtocol, when set, serves kafkaAddr as the one listener of
	// that security protocol (--kafka-listeners) instead of PLAINTEXT
	// (--kafka-addr, which the two cannot be given together).
	kafkaProtocol string

	cmd    *exec.Cmd
	exited chan struct{}
}

// startCluster starts n nodes on loopback, each with its own data
// directory, and waits for their Kafka ports. The cluster addresses are
// picked free first: every node must know them all.
func startCluster(t *testing.T, n int) []*node {
	t.Helper()
	nodes := prepareCluster(t, n)
	startAll(nodes)
	return nodes
}

// startAll starts nodes and waits until they serve.
func startAll(nodes []*node) {
	for _, nd := range nodes {
		nd.start()
	}
	for _, nd := range nodes {
		nd.waitReady()
	}
}

// prepareCluster is startCluster without the start: the caller may give
// the nodes more flags (extraArgs) first.
func prepareCluster(t *testing.T, n int) []*node {
	t.Helper()
	bin := wharfBinary(t)
	base := t.TempDir()
	nodes := make([]*node, n)
	var initial []string
	for i := range nodes {
		nodes[i] = &node{t: t, id: i + 1, bin: bin, dataDir: filepath.Join(base, fmt.Sprint("node", i+1)),
			kafkaAddr: freeAddr(t), clusterAddr: freeAddr(t), logPath: filepath.Join(base, fmt.Sprintf("node%d.log", i+1))}
		initial = append(initial, fmt.Sprintf("%d@%s", i+1, nodes[i].clusterAddr))
	}
	for _, nd := range nodes {
		nd.initial = strings.Join(initial, ",")
	}
	return nodes
}

// start runs the node's process (again, after a kill).
func (nd *node) start() {
	nd.t.Helper()
	logFile, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		nd.t.Fatal(err)
	}
	defer logFile.Close()
	kafkaListener := []string{"--kafka-addr", nd.kafkaAddr}
	if nd.kafkaProtocol != "" {
		kafkaListener = []string{"--kafka-listeners", nd.kafkaProtocol + "://" + nd.kafkaAddr}
	}
	cmd := exec.Command(nd.bin, "serve", "--data-dir", nd.dataDir)
	cmd.Args = append(cmd.Args, kafkaListener...)
	cmd.Args = append(cmd.Args,
		"--amqp-addr=", "--http-addr=", "--nats-addr=",
		"--node-id", fmt.Sprint(nd.id),
		"--cluster-addr", nd.clusterAddr)
	if nd.initial != "" { // a joining node has --join in extraArgs instead
		cmd.Args = append(cmd.Args, "--initial-cluster", nd.initial)
	}
	cmd.Args = append(cmd.Args, nd.extraArgs...)
	cmd.Env = withoutWharfEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		nd.t.Fatal(err)
	}
	nd.cmd, nd.exited = cmd, make(chan struct{})
	exited := nd.exited
	go func() {
		cmd.Wait()
		close(exited)
	}()
	nd.t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
}

// waitReady waits for the node's Kafka port to accept connections.
func (nd *node) waitReady() {
	nd.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", nd.kafkaAddr, 250*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-nd.exited:
			nd.t.Fatalf("node %d exited before serving:\n%s", nd.id, nd.logTail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			nd.t.Fatalf("node %d did not serve within 30s:\n%s", nd.id, nd.logTail())
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (nd *node) kill() {
	nd.t.Helper()
	if err := nd.cmd.Process.Kill(); err != nil {
		nd.t.Fatal(err)
	}
	<-nd.exited
}

func (nd *node) logTail() string {
	b, _ := os.ReadFile(nd.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// freeAddr picks a port free now on an address of its own in 127.0.0.0/8.
// A port picked free on 127.0.0.1 and closed before the node binds it may
// be handed meanwhile to any socket of the machine there (an outgoing
// connection's, whose source is 127.0.0.1); on a random address of the
// loopback block, nothing else is likely to take it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ip := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// withoutWharfEnv is the environment without WHARF_* variables, so a
// developer's shell cannot change the nodes under test.
func withoutWharfEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WHARF_") {
			env = append(env, kv)
		}
	}
	return env
}
