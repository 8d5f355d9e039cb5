package broker

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestNodeCallsBesideTheRemovalQuestion: node calls travel over the
// metadata group, which every node hosts, to the handler of the service
// they name; the removal question (empty data) is answered as before; a
// service without a handler is refused.
func TestNodeCallsBesideTheRemovalQuestion(t *testing.T) {
	c := newTestCluster(t, 2)
	c.broker(2).HandleNodeCalls("echo", func(_ context.Context, from int32, data []byte) ([]byte, error) {
		return append([]byte{byte(from)}, data...), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := c.broker(1).CallNode(ctx, 2, "echo", []byte("hello"))
	if err != nil || string(out) != "\x01hello" {
		t.Fatalf("node call from 1 to 2: %q, %v", out, err)
	}
	group := c.broker(1).meta.raft.Group().ID()
	data, err := c.broker(1).cfg.Cluster.Call(ctx, group, 2, nil)
	var a removalAnswer
	if err != nil || json.Unmarshal(data, &a) != nil || a.Removed {
		t.Fatalf("removal question: %q, %v", data, err)
	}
	if _, err := c.broker(1).CallNode(ctx, 2, "other", nil); err == nil {
		t.Fatal("a call to a service without a handler was answered")
	}
	c.broker(2).HandleNodeCalls("echo", nil)
	if _, err := c.broker(1).CallNode(ctx, 2, "echo", nil); err == nil {
		t.Fatal("a call to a removed handler was answered")
	}
}
