package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/node"
)

// clusterConfigFrom parses args (and the environment) as `wharf serve`'s
// cluster flags and applies them.
func clusterConfigFrom(t *testing.T, args ...string) (*node.ClusterConfig, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := clusterServeFlags(fs)
	if _, err := parseArgs(fs, args, bindEnv(fs, clusterEnv...)); err != nil {
		return nil, err
	}
	var cfg node.Config
	err := f.apply(&cfg)
	return cfg.Cluster, err
}

func TestElectionTimeoutFlag(t *testing.T) {
	node1 := []string{"--node-id", "1", "--cluster-addr", "127.0.0.1:19301", "--initial-cluster", "1@127.0.0.1:19301,2@127.0.0.1:19302,3@127.0.0.1:19303"}
	cc, err := clusterConfigFrom(t, node1...)
	if err != nil {
		t.Fatal(err)
	}
	if cc.TickInterval != 100*time.Millisecond {
		t.Errorf("default: tick %v, want 100ms (a 1 s election timeout is ten ticks)", cc.TickInterval)
	}
	cc, err = clusterConfigFrom(t, append(node1, "--election-timeout", "3s")...)
	if err != nil || cc.TickInterval != 300*time.Millisecond {
		t.Errorf("--election-timeout 3s: %+v, %v; want ticks of 300ms", cc, err)
	}
	t.Setenv("WHARF_ELECTION_TIMEOUT", "500ms")
	cc, err = clusterConfigFrom(t, node1...)
	if err != nil || cc.TickInterval != 50*time.Millisecond {
		t.Errorf("WHARF_ELECTION_TIMEOUT=500ms: %+v, %v; want ticks of 50ms", cc, err)
	}
	for _, bad := range []string{"50ms", "2m", "0s"} {
		if _, err := clusterConfigFrom(t, append(node1, "--election-timeout", bad)...); err == nil {
			t.Errorf("--election-timeout %s accepted", bad)
		}
	}
}

func TestControlledShutdownTimeoutFlag(t *testing.T) {
	node1 := []string{"--node-id", "1", "--cluster-addr", "127.0.0.1:19301", "--initial-cluster", "1@127.0.0.1:19301,2@127.0.0.1:19302,3@127.0.0.1:19303"}
	cc, err := clusterConfigFrom(t, node1...)
	if err != nil || cc.ControlledShutdownTimeout != 10*time.Second {
		t.Errorf("default: %+v, %v; want a controlled shutdown of at most 10s", cc, err)
	}
	cc, err = clusterConfigFrom(t, append(node1, "--controlled-shutdown-timeout", "0")...)
	if err != nil || cc.ControlledShutdownTimeout != 0 {
		t.Errorf("--controlled-shutdown-timeout 0: %+v, %v; want none", cc, err)
	}
	t.Setenv("WHARF_CONTROLLED_SHUTDOWN_TIMEOUT", "3s")
	cc, err = clusterConfigFrom(t, node1...)
	if err != nil || cc.ControlledShutdownTimeout != 3*time.Second {
		t.Errorf("WHARF_CONTROLLED_SHUTDOWN_TIMEOUT=3s: %+v, %v; want 3s", cc, err)
	}
	for _, bad := range []string{"-1s", "2m"} {
		if _, err := clusterConfigFrom(t, append(node1, "--controlled-shutdown-timeout", bad)...); err == nil {
			t.Errorf("--controlled-shutdown-timeout %s accepted", bad)
		}
	}
}
