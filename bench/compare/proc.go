package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// child is a server process the benchmark started: Wharf, RabbitMQ, NATS or
// the kfake runner. It runs in its own process group so that stopping it
// also stops anything it forked (RabbitMQ's start script runs the Erlang VM
// as a child).
type child struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has been waited for
	waitErr error         // valid after done is closed
	// graceful, when set, asks the process to stop (rabbitmqctl stop)
	// before terminate falls back to signals.
	graceful func(ctx context.Context) error
	// cleanup runs after the process has exited (RabbitMQ: stop the epmd
	// daemon the VM started).
	cleanup func()
}

// children owns every process the benchmark started, so that a normal end,
// an error and Ctrl-C all stop them.
type children struct {
	mu   sync.Mutex
	list []*child
}

// start runs cmd with its output appended to logPath and registers it.
func (cs *children) start(name string, cmd *exec.Cmd, logPath string) (*child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	cs.mu.Lock()
	cs.list = append(cs.list, c)
	cs.mu.Unlock()
	return c, nil
}

// stopAll stops every registered process that is still running, newest
// first, and forgets them.
func (cs *children) stopAll() {
	cs.mu.Lock()
	list := cs.list
	cs.list = nil
	cs.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		if err := list[i].terminate(30 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "compare: stopping %s: %v\n", list[i].name, err)
		}
	}
}

// forget drops c from the registry after the caller stopped it itself.
func (cs *children) forget(c *child) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for i, x := range cs.list {
		if x == c {
			cs.list = append(cs.list[:i], cs.list[i+1:]...)
			return
		}
	}
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// processID is pid in the form contender.pid takes.
func (c *child) processID() (int, error) { return c.pid(), nil }

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// terminate stops the process: graceful stop if it has one, then SIGTERM to
// its process group, then SIGKILL once timeout has passed. Cleanup runs in
// every case.
func (c *child) terminate(timeout time.Duration) error {
	defer c.runCleanup()
	if c.exited() {
		return nil
	}
	deadline := time.Now().Add(timeout)
	if c.graceful != nil {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := c.graceful(ctx)
		cancel()
		if err == nil && c.waitUntil(deadline) {
			return nil
		}
	}
	c.signalGroup(syscall.SIGTERM)
	if c.waitUntil(deadline) {
		return nil
	}
	c.signalGroup(syscall.SIGKILL)
	<-c.done
	return fmt.Errorf("%s did not stop within %v; killed", c.name, timeout)
}

// kill sends SIGKILL to the process group and waits for the process: the
// crash-restart case.
func (c *child) kill() {
	c.signalGroup(syscall.SIGKILL)
	<-c.done
}

func (c *child) runCleanup() {
	if c.cleanup != nil {
		c.cleanup()
		c.cleanup = nil
	}
}

// signalGroup signals the child's whole process group (its pid, since it
// was started with Setpgid).
func (c *child) signalGroup(sig syscall.Signal) {
	if err := syscall.Kill(-c.pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = c.cmd.Process.Signal(sig)
	}
}

// waitUntil waits for the process to exit until deadline and reports
// whether it did.
func (c *child) waitUntil(deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// loopback is the 127.0.0.1 address of port.
func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// waitForTCP dials addr until it accepts, the child exits, or timeout
// passes.
func waitForTCP(ctx context.Context, c *child, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if c != nil && c.exited() {
			return fmt.Errorf("%s exited before %s accepted: %v", c.name, addr, c.waitErr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s not accepting after %v: %w", c.name, addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
