package nats_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	wnats "github.com/wharf-mq/wharf/internal/nats"
	"github.com/wharf-mq/wharf/internal/subjects"
)

const testTimeout = 10 * time.Second

// limits are the settings a test gives both servers.
type limits struct {
	users         map[string]string
	token         string
	maxPayload    int
	maxPending    int
	authTimeout   time.Duration
	writeDeadline time.Duration
	// jetStream runs JetStream in nats-server, and makes Wharf's front
	// end announce it (INFO only: no test here serves its API).
	jetStream bool
}

// server is a NATS server under test: Wharf's front end or nats-server.
type server struct {
	name string
	addr string
}

func (s server) url() string { return "nats://" + s.addr }

// bothServers starts Wharf's NATS front end and an in-process nats-server
// with the same limits, each on a free loopback port, stopped when the
// test ends.
func bothServers(t testing.TB, l limits) []server {
	return []server{startWharf(t, l), startNATSServer(t, l)}
}

func startWharf(t testing.TB, l limits) server {
	t.Helper()
	cfg := wnats.Config{
		Users:         l.users,
		Token:         l.token,
		MaxPayload:    l.maxPayload,
		MaxPending:    l.maxPending,
		AuthTimeout:   l.authTimeout,
		WriteDeadline: l.writeDeadline,
		JetStream:     l.jetStream,
	}
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := wnats.NewServer(subjects.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("wharf shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("wharf serve: %v", err)
		}
	})
	return server{name: "wharf", addr: ln.Addr().String()}
}

func startNATSServer(t testing.TB, l limits) server {
	t.Helper()
	opts := &natsserver.Options{
		Host:          "127.0.0.1",
		Port:          -1,
		NoLog:         true,
		NoSigs:        true,
		MaxPayload:    int32(l.maxPayload),
		MaxPending:    int64(l.maxPending),
		WriteDeadline: l.writeDeadline,
		Authorization: l.token,
	}
	if l.jetStream {
		opts.JetStream, opts.StoreDir = true, t.TempDir()
	}
	for user, pass := range l.users {
		opts.Users = append(opts.Users, &natsserver.User{Username: user, Password: pass})
	}
	if l.authTimeout > 0 {
		opts.AuthTimeout = l.authTimeout.Seconds()
	}
	s, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(testTimeout) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return server{name: "nats-server", addr: s.Addr().String()}
}
