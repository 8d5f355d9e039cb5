package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Where the Debian package installs RabbitMQ's own scripts. /usr/sbin's
// wrappers switch to the rabbitmq user, whose environment and home would
// not be this benchmark's, so the scripts are run directly.
const (
	rabbitServerScript = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	rabbitCtlScript    = "/usr/lib/rabbitmq/bin/rabbitmqctl"
)

// rabbitServer is a RabbitMQ node running in a private directory: its own
// Mnesia and log directories, Erlang cookie, epmd port and listeners, all on
// 127.0.0.1.
type rabbitServer struct {
	*child
	amqpAddr string
	httpAddr string // the management API's, "" without it
	nodeName string
	env      []string
	pidFile  string
	version  string
}

// rabbitAvailable reports whether RabbitMQ's scripts are installed.
func rabbitAvailable() bool {
	_, err := os.Stat(rabbitServerScript)
	return err == nil
}

// rabbitNode is what sets one RabbitMQ node apart on this machine: its
// name, its directory (configuration, Mnesia, logs, pid file), the HOME
// holding its Erlang cookie (shared by the nodes of one cluster) and its
// ports, all on 127.0.0.1. The nodes of one cluster share one epmd port.
type rabbitNode struct {
	name                         string // Erlang node name, e.g. bench@localhost
	dir, home                    string
	amqpPort, distPort, epmdPort int
	mgmtPort                     int // the management plugin's HTTP port; 0: no plugins
}

// conf is the node's rabbitmq.conf: AMQP on loopback, logs to file at
// warning level, everything else RabbitMQ's default.
func (n rabbitNode) conf() string {
	conf := fmt.Sprintf("listeners.tcp.1 = 127.0.0.1:%d\nlog.console = false\nlog.file.level = warning\n", n.amqpPort)
	if n.mgmtPort > 0 {
		conf += fmt.Sprintf("management.tcp.ip = 127.0.0.1\nmanagement.tcp.port = %d\n", n.mgmtPort)
	}
	return conf
}

// plugins is the node's enabled_plugins file: the management plugin if
// it has a port, else none.
func (n rabbitNode) plugins() string {
	if n.mgmtPort > 0 {
		return "[rabbitmq_management].\n"
	}
	return "[].\n"
}

// env is the environment RabbitMQ's scripts (server and rabbitmqctl) read
// for this node, beyond the process's own.
func (n rabbitNode) env() []string {
	// The Erlang distribution (node <-> node, node <-> rabbitmqctl) and
	// epmd listen on loopback only, on ports of their own, so a system
	// RabbitMQ or epmd is neither disturbed nor used.
	loopbackDist := "-kernel inet_dist_use_interface {127,0,0,1}"
	return []string{
		"HOME=" + n.home,
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(n.dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(n.dir, "log"),
		"RABBITMQ_NODENAME=" + n.name,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(n.amqpPort),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(n.distPort),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(n.dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(n.dir, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(n.dir, "enabled_plugins"),
		"RABBITMQ_PID_FILE=" + n.pidFile(),
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=" + loopbackDist,
		"RABBITMQ_CTL_ERL_ARGS=" + loopbackDist,
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"ERL_EPMD_PORT=" + strconv.Itoa(n.epmdPort),
	}
}

func (n rabbitNode) pidFile() string { return filepath.Join(n.dir, "rabbit.pid") }

// freePorts reserves n free loopback ports.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}

// writeErlangCookie makes home and a random Erlang cookie in it.
func writeErlangCookie(home string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	cookie := make([]byte, 16)
	if _, err := rand.Read(cookie); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(home, ".erlang.cookie"), []byte(hex.EncodeToString(cookie)), 0o400)
}

// startRabbitMQ starts a RabbitMQ node in dir, with its own cookie and
// epmd, and waits until it is up (startRabbitNode).
func (s *suite) startRabbitMQ(ctx context.Context, dir string) (*rabbitServer, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	n := rabbitNode{name: "bench@localhost", dir: dir, home: filepath.Join(dir, "home"),
		amqpPort: ports[0], distPort: ports[1], epmdPort: ports[2]}
	if err := writeErlangCookie(n.home); err != nil {
		return nil, err
	}
	return s.startRabbitNode(ctx, n, func() { killEpmd(n.epmdPort) })
}

// startRabbitNode starts node n (whose home already holds the cookie) and
// waits until its AMQP port accepts and `rabbitmqctl await_startup`
// succeeds. cleanup, when set, runs once the node has stopped, also when
// it fails to start.
func (s *suite) startRabbitNode(ctx context.Context, n rabbitNode, cleanup func()) (*rabbitServer, error) {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(n.dir, "rabbitmq.conf"), []byte(n.conf()), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(n.dir, "enabled_plugins"), []byte(n.plugins()), 0o644); err != nil {
		return nil, err
	}
	r := &rabbitServer{amqpAddr: loopback(n.amqpPort), nodeName: n.name, pidFile: n.pidFile(),
		env: append(os.Environ(), n.env()...)}
	if n.mgmtPort > 0 {
		r.httpAddr = loopback(n.mgmtPort)
	}
	cmd := exec.Command(rabbitServerScript)
	cmd.Dir = n.dir
	cmd.Env = r.env
	var err error
	r.child, err = s.procs.start("rabbitmq "+n.name, cmd, filepath.Join(n.dir, "server.log"))
	if err != nil {
		if cleanup != nil {
			cleanup()
		}
		return nil, err
	}
	r.graceful = func(ctx context.Context) error {
		_, err := r.ctl(ctx, "stop")
		return err
	}
	r.cleanup = cleanup
	if err := waitForTCP(ctx, r.child, r.amqpAddr, 3*time.Minute); err != nil {
		s.procs.forget(r.child)
		r.terminate(30 * time.Second)
		return nil, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if out, err := r.ctl(waitCtx, "await_startup"); err != nil {
		s.procs.forget(r.child)
		r.terminate(30 * time.Second)
		return nil, fmt.Errorf("rabbitmqctl await_startup: %v: %s", err, out)
	}
	if out, err := r.ctl(waitCtx, "version"); err == nil {
		r.version = strings.TrimSpace(out)
	}
	return r, nil
}

// ctl runs rabbitmqctl against the node with the node's environment.
func (r *rabbitServer) ctl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, rabbitCtlScript, append([]string{"-n", r.nodeName}, args...)...)
	cmd.Env = r.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// vmPid is the Erlang VM's pid (from the node's pid file), the process whose
// memory and open files are RabbitMQ's.
func (r *rabbitServer) vmPid() (int, error) {
	b, err := os.ReadFile(r.pidFile)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func (r *rabbitServer) amqpURL() string { return "amqp://guest:guest@" + r.amqpAddr + "/" }

// killEpmd stops the epmd daemon that the RabbitMQ node started on port:
// epmd detaches from the node's process group, so it is found by the port
// in its environment (and only that one is signalled).
func killEpmd(port int) {
	want := []byte("ERL_EPMD_PORT=" + strconv.Itoa(port) + "\x00")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "epmd" {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
}

// withFreshRabbitMQ starts a RabbitMQ node of its own in a new directory
// under the suite's, runs fn with it and the Erlang VM's pid, and stops it.
// It returns the node's version, or why there is no node (not installed,
// did not start); only a canceled context is an error.
func (s *suite) withFreshRabbitMQ(ctx context.Context, name string, fn func(r *rabbitServer, pid int)) (version, skip string, err error) {
	if !rabbitAvailable() {
		return "", "rabbitmq-server not installed", nil
	}
	r, err := s.startRabbitMQ(ctx, filepath.Join(s.work, s.uniqueName(name)))
	if err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		return "", "RabbitMQ did not start: " + err.Error(), nil
	}
	defer func() {
		s.procs.forget(r.child)
		if err := r.terminate(2 * time.Minute); err != nil {
			s.logf("stopping RabbitMQ: %v", err)
		}
	}()
	pid, err := r.vmPid()
	if err != nil {
		return "", "RabbitMQ's pid file: " + err.Error(), nil
	}
	fn(r, pid)
	return r.version, "", ctx.Err()
}
