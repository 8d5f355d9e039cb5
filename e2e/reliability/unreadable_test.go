package reliability

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestUnreadablePartitionThroughTheNode: franz-go writes 3,000 records to
// each of 3 partitions; with the node stopped, partition 1's first segment
// is made unopenable (a directory in its place, as an I/O error would make
// it). The node must start with that partition offline, as Kafka clients
// see a corrupt one (KAFKA_STORAGE_ERROR everywhere), and serve every
// acknowledged record of the other two.
func TestUnreadablePartitionThroughTheNode(t *testing.T) {
	const topic = "unreadable"
	dataDir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir), newNodeLog(t, slog.LevelWarn).option())
	createTopic(t, n.KafkaAddr(), topic, 3, nil)
	acked := produceEach(t, n.KafkaAddr(), topic, 3)
	closeNode(t, n)

	seg := filepath.Join(dataDir, topic+"-1", fmt.Sprintf("%020d.log", 0))
	if err := os.Remove(seg); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(seg, 0o755); err != nil {
		t.Fatal(err)
	}
	logs := newNodeLog(t, slog.LevelWarn)
	n = nodetest.Start(t, nodetest.WithDataDir(dataDir), logs.option())
	tp := mustTopic(t, n, topic)
	if err := tp.Partitions()[1].Offline(); err == nil {
		t.Fatal("the partition with an unopenable segment is online")
	}
	if len(logs.find("level=ERROR", "partition offline", seg)) == 0 {
		t.Errorf("no error line names %s", seg)
	}
	checkOfflineOverKafka(t, newKafkaClient(t, n.KafkaAddr()), tp, 1)
	back := readTopic(t, n.KafkaAddr(), topic, 1)
	var c tally
	for _, a := range acked {
		if a.partition == 1 {
			continue
		}
		c.checked++
		if back[a.partition][a.offset] != a.value {
			c.lost++
		}
	}
	t.Logf("partitions 0 and 2: %s", c)
	if !c.ok() {
		t.Error("acknowledged records of the healthy partitions are missing")
	}
}
