package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// natsServer is a nats-server subprocess with JetStream on, its store in a
// private directory, listening on 127.0.0.1.
type natsServer struct {
	*child
	addr    string
	version string
}

// natsAvailable returns nats-server's path, or "" when it is not installed.
func natsAvailable() string {
	p, err := exec.LookPath("nats-server")
	if err != nil {
		return ""
	}
	return p
}

// startNATS runs `nats-server -js -sd dir` on a free loopback port and waits
// until it accepts.
func (s *suite) startNATS(ctx context.Context, bin, dir string) (*natsServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	n := &natsServer{addr: loopback(port)}
	if out, err := exec.CommandContext(ctx, bin, "--version").Output(); err == nil {
		n.version = strings.TrimSpace(string(out))
	}
	cmd := exec.Command(bin, "-js", "-sd", dir, "-a", "127.0.0.1", "-p", strconv.Itoa(port))
	n.child, err = s.procs.start("nats-server", cmd, filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	if err := waitForTCP(ctx, n.child, n.addr, time.Minute); err != nil {
		n.terminate(10 * time.Second)
		return nil, err
	}
	return n, nil
}

func (n *natsServer) url() string { return "nats://" + n.addr }
