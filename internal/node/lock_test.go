//go:build unix

package node_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestSecondNodeOnDataDirIsRefused: while one node has a data directory
// open, a second start on it fails and names the holder's pid; once the
// first closes, the directory opens again.
func TestSecondNodeOnDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	first := nodetest.Start(t, nodetest.WithDataDir(dir))
	second, err := node.Start(node.Config{DataDir: dir, KafkaAddr: "127.0.0.1:0"})
	if err == nil {
		second.Close(context.Background())
		t.Fatal("a second node opened a data directory in use")
	}
	if want := "pid " + strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("refusal %q does not name the holder (%s)", err, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	third := nodetest.Start(t, nodetest.WithDataDir(dir))
	if err := third.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
