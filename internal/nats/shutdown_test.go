package nats_test

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	wnats "github.com/wharf-mq/wharf/internal/nats"
	"github.com/wharf-mq/wharf/internal/subjects"
)

// TestShutdownEndsEveryConnection shuts a server down under clients that
// subscribe, publish and stall: every client is disconnected and no
// goroutine of a connection outlives Shutdown.
func TestShutdownEndsEveryConnection(t *testing.T) {
	srv, err := wnats.NewServer(subjects.New(), wnats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s := server{name: "wharf", addr: ln.Addr().String()}

	disconnected := make(chan struct{}, 3)
	for range 3 {
		nc := connect(t, s, nats.NoReconnect(), nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnected <- struct{}{} }))
		nc.Subscribe("busy", func(*nats.Msg) {})
		nc.Publish("busy", []byte("x"))
		nc.Flush()
	}
	stalled := stalledSubscriber(t, s, "busy")

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for range 3 {
		select {
		case <-disconnected:
		case <-time.After(testTimeout):
			t.Fatal("a client was not disconnected")
		}
	}
	if _, err := closedByServer(stalled); err != nil {
		t.Fatalf("stalled client not closed: %v", err)
	}
	// A writer that has just closed writerDone may still be returning:
	// give it a moment.
	deadline := time.Now().Add(time.Second)
	for {
		leaked := connGoroutine()
		if leaked == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutine outlived Shutdown:\n%s", leaked)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// connGoroutine returns the stack of a goroutine running a connection's
// code, or "".
func connGoroutine() string {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "internal/nats.(*conn).") {
			return g
		}
	}
	return ""
}
