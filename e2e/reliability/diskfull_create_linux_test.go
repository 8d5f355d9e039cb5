//go:build linux

package reliability

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestDiskFullTopicCreation creates a topic on a full disk: CreateTopics
// must fail with KAFKA_STORAGE_ERROR and leave nothing behind, neither in
// the metadata nor on disk, so that the node starts again, still on the
// full disk, without the topic, and creates it once space is back.
func TestDiskFullTopicCreation(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a file system; skipped with -short")
	}
	mnt := mountTmpfs(t, "8m")
	dataDir := filepath.Join(mnt, "data")
	cfgOpt := nodetest.WithConfig(func(c *node.Config) { c.AMQP.DiskFreeLimit = -1 })
	start := func() *node.Node {
		return nodetest.Start(t, nodetest.WithDataDir(dataDir), newNodeLog(t, slog.LevelWarn).option(), cfgOpt)
	}
	n := start()
	createTopic(t, n.KafkaAddr(), "before", 1, nil)
	fillLeaving(t, filepath.Join(mnt, "filler"), 0)

	const topic = "on-full"
	err := createTopicErr(t, n.KafkaAddr(), topic, 4)
	t.Logf("CreateTopics on the full disk (%d bytes free): %v", freeBytes(t, mnt), err)
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Errorf("CreateTopics on a full disk: %v, want %s", err, kerr.KafkaStorageError.Message)
	}
	checkNoTopic := func(stage string) {
		t.Helper()
		if _, err := n.Broker().Topic(topic); err == nil {
			t.Errorf("%s: the topic whose creation failed exists", stage)
		}
		if left, _ := filepath.Glob(filepath.Join(dataDir, topic+"-*")); len(left) > 0 {
			t.Errorf("%s: the failed creation left %v", stage, left)
		}
	}
	checkNoTopic("after the failed create")

	// Closing writes checkpoints: room for them, then full again.
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	closeNode(t, n)
	fillLeaving(t, filepath.Join(mnt, "filler"), 0)
	n = start()
	checkNoTopic("after a restart on the full disk")
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	createTopic(t, n.KafkaAddr(), topic, 4, nil)
	produceEach(t, n.KafkaAddr(), topic, 4)
}

// createTopicErr creates a topic and returns the broker's answer.
func createTopicErr(t *testing.T, addr, topic string, partitions int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(newKafkaClient(t, addr)).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	return err
}
