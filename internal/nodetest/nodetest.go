// Package nodetest starts a real Wharf node for end-to-end tests: a fresh
// data directory under t.TempDir(), the Kafka, AMQP and HTTP listeners on
// 127.0.0.1:0, and a clean shutdown registered with t.Cleanup.
package nodetest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/node"
)

// Option adjusts the node's Config before it starts.
type Option func(*node.Config)

// WithConfig lets a test change any field of the node's Config.
func WithConfig(fn func(*node.Config)) Option { return Option(fn) }

// WithDataDir reuses a data directory, e.g. to restart a node on the data a
// previous one left behind.
func WithDataDir(dir string) Option {
	return func(c *node.Config) { c.DataDir = dir }
}

// Start returns a running node. Its log goes to t.Log (shown on failure or
// with -v). It is closed, with a 10 s limit, when the test ends; a failing
// Close fails the test. A test may Close it earlier itself.
func Start(t testing.TB, opts ...Option) *node.Node {
	t.Helper()
	logs := &testLogWriter{t: t}
	cfg := node.Config{
		DataDir:   t.TempDir(),
		KafkaAddr: "127.0.0.1:0",
		AMQPAddr:  "127.0.0.1:0",
		HTTPAddr:  "127.0.0.1:0",
		Logger:    slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatalf("nodetest: start node: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Errorf("nodetest: close node: %v", err)
		}
		// Anything still logging past this point would call t.Log after
		// the test ended, which panics; drop it instead.
		logs.stop()
	})
	return n
}

// AMQPURL is the URL an AMQP client dials to reach n as the default user
// guest, in the default vhost.
func AMQPURL(n *node.Node) string { return "amqp://guest:guest@" + n.AMQPAddr() + "/" }

// HTTPURL is the base URL of n's management API, e.g.
// "http://127.0.0.1:41234" (user guest, password guest).
func HTTPURL(n *node.Node) string { return "http://" + n.HTTPAddr() }

// testLogWriter forwards log lines to t.Log until stop is called.
type testLogWriter struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(string(trimNewline(p)))
	}
	return len(p), nil
}

func (w *testLogWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

func trimNewline(p []byte) []byte {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		return p[:n-1]
	}
	return p
}
