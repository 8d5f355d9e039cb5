package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sys/unix"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// netNamespace is a network namespace joined to the test's by a veth
// pair: the broker listens on hostIP, in the test's namespace; clients
// dial from inside the namespace, from a non-loopback address.
type netNamespace struct {
	path   string // /var/run/netns/NAME
	hostIP string
}

// newNetNamespace makes one for the test and removes it at its end. It
// needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN): without it the test fails,
// naming what is missing.
func newNetNamespace(t *testing.T) *netNamespace {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("guest's loopback-only rule is tested from a network namespace: run the tests as root, as .ci/run does, or with -short")
	}
	var id [4]byte
	rand.Read(id[:])
	suffix := hex.EncodeToString(id[:])
	name, hostEnd, nsEnd := "wharf-"+suffix, "wh"+suffix, "wn"+suffix
	// A /30 of its own, so tests running at once on the machine do not
	// share addresses.
	subnet := fmt.Sprintf("10.%d.%d", 200+int(id[0])%50, id[1])
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", name)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", name).Run()
		exec.Command("ip", "link", "del", hostEnd).Run() // gone with its peer, normally
	})
	ip("link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd)
	ip("link", "set", nsEnd, "netns", name)
	ip("addr", "add", subnet+".1/30", "dev", hostEnd)
	ip("link", "set", hostEnd, "up")
	ip("netns", "exec", name, "ip", "addr", "add", subnet+".2/30", "dev", nsEnd)
	ip("netns", "exec", name, "ip", "link", "set", nsEnd, "up")
	return &netNamespace{path: "/var/run/netns/" + name, hostIP: subnet + ".1"}
}

// dial connects to addr from inside the namespace: on a thread of its
// own that enters the namespace, dials (the socket belongs to the
// namespace it was made in) and goes back; a thread that cannot go back
// is left locked, so the runtime ends it.
func (ns *netNamespace) dial(addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer home.Close()
		target, err := os.Open(ns.path)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("enter %s: %w", ns.path, err)}
			return
		}
		conn, err := net.DialTimeout("tcp", addr, testTimeout)
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}

// TestGuestOnlyFromLoopback: guest/guest is refused from a non-loopback
// address, over AMQP (403 "User 'guest' can only connect via localhost")
// and the management API (401 "User can only log in via localhost"),
// while another user from the same address gets in, as in RabbitMQ's
// loopback_users.
func TestGuestOnlyFromLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root for a network namespace; skipped with -short")
	}
	ns := newNetNamespace(t)
	logs := &syncBuffer{}
	n := nodetest.Start(t, nodetest.WithConfig(func(c *node.Config) {
		c.AMQPAddr, c.HTTPAddr = ns.hostIP+":0", ns.hostIP+":0"
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}))
	addAMQPUser(t, n, "app", "App-Pass-1", "administrator")

	amqpAs := func(user, password string) (*amqp.Connection, error) {
		conn, err := ns.dial(n.AMQPAddr())
		if err != nil {
			t.Fatalf("dial from the namespace: %v", err)
		}
		return amqp.Open(conn, amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: user, Password: password}}, Vhost: "/"})
	}
	// amqp091-go reports the refusal as ErrCredentials; the broker's
	// log says why.
	if c, err := amqpAs("guest", "guest"); err == nil {
		c.Close()
		t.Fatal("guest logged in over AMQP from a non-loopback address")
	} else if !errors.Is(err, amqp.ErrCredentials) || !strings.Contains(logs.String(), "user 'guest' may only connect via localhost") {
		t.Fatalf("guest over AMQP: %v; log:\n%s", err, logs.String())
	}
	c, err := amqpAs("app", "App-Pass-1")
	if err != nil {
		t.Fatalf("another user from the same address: %v", err)
	}
	c.Close()

	client := &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return ns.dial(n.HTTPAddr()) },
	}}
	defer client.CloseIdleConnections()
	const overview = "http://localhost/api/overview" // the dialer goes to the node
	if code, body := apiGet(t, client, overview, "guest", "guest"); code != 401 || !strings.Contains(string(body), "User can only log in via localhost") {
		t.Fatalf("guest over HTTP: %d %s", code, body)
	}
	if code, body := apiGet(t, client, overview, "app", "App-Pass-1"); code != 200 {
		t.Fatalf("another user over HTTP: %d %s", code, body)
	}
}
