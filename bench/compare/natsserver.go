package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The NATS peer is a current nats-server, built from the Go module
// proxy the first time the benchmark needs it (it is not a dependency of
// Wharf's module) and kept in the user's cache directory.
const (
	natsServerModule  = "github.com/nats-io/nats-server/v2"
	natsServerVersion = "v2.15.2"
)

// natsSync is how a nats-server peer syncs its JetStream file store.
type natsSync struct {
	name   string // shown in the table
	dir    string // its data directory under the suite's
	always bool   // sync_interval: always
}

var (
	// natsSyncAlways fsyncs every write before acknowledging it: the peer
	// whose acknowledgement means what Wharf's means.
	natsSyncAlways = natsSync{name: "NATS JetStream " + natsServerVersion + " (file, sync_interval: always)", dir: "nats-sync-always", always: true}
	// natsSyncDefault acknowledges once a message is written to its file
	// and fsyncs in the background, every 2 minutes by default.
	natsSyncDefault = natsSync{name: "NATS JetStream " + natsServerVersion + " (file, default sync: acks before fsync)", dir: "nats-default"}
)

// natsServer is a nats-server subprocess with JetStream on, its store in a
// private directory, listening on 127.0.0.1.
type natsServer struct {
	*child
	addr    string
	version string
}

// buildNATSServer returns the path of nats-server natsServerVersion,
// running `go install` into the user's cache directory the first time.
func buildNATSServer(ctx context.Context) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "wharf-bench", "nats-server-"+natsServerVersion)
	bin := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Installed into a fresh directory and renamed, so an interrupted build
	// leaves no half-written binary where the next run would trust it.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "install", natsServerModule+"@"+natsServerVersion)
	// Outside Wharf's module and workspace, so its go.mod is neither used
	// nor changed.
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %v\n%s", natsServerModule, natsServerVersion, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "nats-server"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// startNATS runs nats-server with JetStream storing in dir, synced as mode
// says, on a free loopback port, and waits until it accepts.
func (s *suite) startNATS(ctx context.Context, bin, dir string, mode natsSync) (*natsServer, error) {
	return s.startNATSWith(ctx, bin, dir, func(addr string) string { return natsConfig(addr, dir, mode) })
}

// startCoreNATS runs nats-server with its default settings (Core NATS, no
// JetStream) on a free loopback port, its files in dir.
func (s *suite) startCoreNATS(ctx context.Context, bin, dir string) (*natsServer, error) {
	return s.startNATSWith(ctx, bin, dir, func(addr string) string { return fmt.Sprintf("listen: %q\n", addr) })
}

// startNATSWith runs nats-server from the configuration config writes for
// a free loopback address, its files in dir, and waits until it accepts.
func (s *suite) startNATSWith(ctx context.Context, bin, dir string, config func(addr string) string) (*natsServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	n := &natsServer{addr: loopback(port)}
	if out, err := exec.CommandContext(ctx, bin, "--version").Output(); err == nil {
		n.version = strings.TrimSpace(strings.TrimPrefix(string(out), "nats-server:"))
	}
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(config(n.addr)), 0o644); err != nil {
		return nil, err
	}
	n.child, err = s.procs.start("nats-server", exec.Command(bin, "-c", conf), filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	if err := waitForTCP(ctx, n.child, n.addr, time.Minute); err != nil {
		n.terminate(10 * time.Second)
		return nil, err
	}
	return n, nil
}

// natsConfig is the configuration file of a nats-server peer: default
// settings except the listen address, the store directory and, for
// natsSyncAlways, sync_interval.
func natsConfig(addr, storeDir string, mode natsSync) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %q\njetstream {\n  store_dir: %q\n", addr, filepath.Join(storeDir, "store"))
	if mode.always {
		b.WriteString("  sync_interval: always\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func (n *natsServer) url() string { return "nats://" + n.addr }
