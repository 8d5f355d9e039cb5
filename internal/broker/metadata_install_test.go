package broker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestApplyLoopStopsAfterFailedMetadataInstall: the apply loop stops
// when asked to while the metadata replica's install count is odd, as
// after a snapshot install that failed (the log may be half replaced, and
// no install may ever end the count). Node 3, cut off while the others
// compact, is sent a snapshot; its install fails where it resets its log
// (an index file it must delete is a non-empty directory, as a failing
// disk would fail it). Its own apply loop then waits for the high
// watermark, which the failed group never moves; the loop run here with
// an ended context takes the path that one takes whenever it meets the
// count changed (after a read the install cut short): it must return, not
// spin, or Close would wait for it for ever.
func TestApplyLoopStopsAfterFailedMetadataInstall(t *testing.T) {
	c := newTestClusterWith(t, 3, func(cfg *Config) { cfg.MetadataLogSegmentBytes = 16 << 10 })
	if _, err := c.broker(1).CreateTopic(TopicSpec{Name: "led", ReplicationFactor: 3}, false); err != nil {
		t.Fatal(err)
	}
	c.waitFor("node 3 to apply the topic", func() bool { _, err := c.broker(3).Topic("led"); return err == nil })
	c.isolate(3, true)
	c.waitFor("a metadata leader on node 1 or 2", func() bool {
		l := c.leader()
		return l == 1 || l == 2
	})
	metadataChurn(t, c, "cut", 100)
	for _, id := range []int32{1, 2} {
		compactNode(t, c.broker(id))
	}
	dir := filepath.Join(c.base, "node3", metadataLogName)
	idx, _ := filepath.Glob(filepath.Join(dir, "*.index"))
	more, _ := filepath.Glob(filepath.Join(dir, "log", "*.index"))
	idx = append(idx, more...)
	if len(idx) == 0 {
		t.Fatalf("no index file in %s", dir)
	}
	if err := os.Remove(idx[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(idx[0], "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	b3 := c.broker(3)
	c.isolate(3, false)
	c.waitFor("node 3's install to fail", func() bool { return b3.meta.raft.Installs()%2 == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := make(chan struct{})
	go func() {
		b3.applyLoop(ctx)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the apply loop did not stop within 10 s of its context's end while the install count was odd")
	}
}
