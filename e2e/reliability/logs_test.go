package reliability

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// nodeLog is a node's log: lines at or above a level go to t.Log, and every
// line (any level) is kept for the test to search. It stops forwarding when
// the test ends, before t.Log would panic.
type nodeLog struct {
	t       *testing.T
	show    slog.Level
	mu      sync.Mutex
	lines   []string
	stopped bool
}

// newNodeLog must be called before nodetest.Start, so that its cleanup runs
// after the node's Close (cleanups run last-registered first).
func newNodeLog(t *testing.T, show slog.Level) *nodeLog {
	l := &nodeLog{t: t, show: show}
	t.Cleanup(func() {
		l.mu.Lock()
		l.stopped = true
		l.mu.Unlock()
	})
	return l
}

func (l *nodeLog) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	if !l.stopped && levelOf(line) >= l.show {
		l.t.Log(line)
	}
	return len(p), nil
}

func levelOf(line string) slog.Level {
	for _, lv := range []slog.Level{slog.LevelError, slog.LevelWarn, slog.LevelInfo} {
		if strings.Contains(line, "level="+lv.String()) {
			return lv
		}
	}
	return slog.LevelDebug
}

// option is the nodetest option installing this log.
func (l *nodeLog) option() nodetest.Option {
	return nodetest.WithConfig(func(c *node.Config) {
		c.Logger = slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
}

// find returns the lines containing every one of parts.
func (l *nodeLog) find(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}
