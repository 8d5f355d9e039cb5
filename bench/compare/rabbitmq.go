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
	env      []string
	pidFile  string
	version  string
}

// rabbitAvailable reports whether RabbitMQ's scripts are installed.
func rabbitAvailable() bool {
	_, err := os.Stat(rabbitServerScript)
	return err == nil
}

// startRabbitMQ starts a RabbitMQ node in dir and waits until its AMQP port
// accepts and `rabbitmqctl await_startup` succeeds.
func (s *suite) startRabbitMQ(ctx context.Context, dir string) (*rabbitServer, error) {
	ports := make([]int, 3)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	amqpPort, distPort, epmdPort := ports[0], ports[1], ports[2]
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	cookie := make([]byte, 16)
	if _, err := rand.Read(cookie); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(home, ".erlang.cookie"), []byte(hex.EncodeToString(cookie)), 0o400); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("listeners.tcp.1 = 127.0.0.1:%d\nlog.console = false\nlog.file.level = warning\n", amqpPort)
	confPath := filepath.Join(dir, "rabbitmq.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	pluginsPath := filepath.Join(dir, "enabled_plugins")
	if err := os.WriteFile(pluginsPath, []byte("[].\n"), 0o644); err != nil {
		return nil, err
	}
	// The Erlang distribution (node <-> rabbitmqctl) and epmd listen on
	// loopback only, on ports of their own, so a system RabbitMQ or epmd is
	// neither disturbed nor used.
	loopbackDist := "-kernel inet_dist_use_interface {127,0,0,1}"
	r := &rabbitServer{amqpAddr: loopback(amqpPort), pidFile: filepath.Join(dir, "rabbit.pid")}
	r.env = append(os.Environ(),
		"HOME="+home,
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_NODENAME=bench@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(amqpPort),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(distPort),
		"RABBITMQ_CONFIG_FILE="+confPath,
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(dir, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+pluginsPath,
		"RABBITMQ_PID_FILE="+r.pidFile,
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+loopbackDist,
		"RABBITMQ_CTL_ERL_ARGS="+loopbackDist,
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"ERL_EPMD_PORT="+strconv.Itoa(epmdPort),
	)
	cmd := exec.Command(rabbitServerScript)
	cmd.Dir = dir
	cmd.Env = r.env
	var err error
	r.child, err = s.procs.start("rabbitmq", cmd, filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	r.graceful = func(ctx context.Context) error {
		_, err := r.ctl(ctx, "stop")
		return err
	}
	r.cleanup = func() { killEpmd(epmdPort) }
	if err := waitForTCP(ctx, r.child, r.amqpAddr, 3*time.Minute); err != nil {
		r.terminate(30 * time.Second)
		return nil, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if out, err := r.ctl(waitCtx, "await_startup"); err != nil {
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
	cmd := exec.CommandContext(ctx, rabbitCtlScript, append([]string{"-n", "bench@localhost"}, args...)...)
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
