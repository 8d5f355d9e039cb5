package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestFranzIdempotentProducerSurvivesCompaction: an idempotent franz-go
// producer writes versions of a few keys to a compacted topic with tiny
// segments; another producer then overwrites the tail of the idempotent
// producer's last batch, so compaction removes those records. The node
// restarts without its producer-state snapshot, rebuilding the producer
// table from the log alone, as a replica does when it becomes leader (and a
// single node does after a crash that came before its first snapshot). The
// same producer then keeps producing: with its last batch's sequence gone
// from the log, the broker would answer OUT_OF_ORDER_SEQUENCE_NUMBER; with
// it kept (Kafka's cleaner keeps each producer's last batch, emptied if need
// be) the producer goes on with the same id and epoch, and nothing is
// written twice.
func TestFranzIdempotentProducerSurvivesCompaction(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, nodetest.WithDataDir(dir))
	addr := n.KafkaAddr()
	const topic = "compacted-idempotent"
	createTopic(t, newAdmin(t, n), topic, 1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"),
		"segment.bytes":  kadm.StringPtr("1024"),
	})
	idem, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(idem.Close)

	const keys, versions = 5, 20
	latest := map[string]string{}
	version := func(v int, from int) []*kgo.Record {
		var recs []*kgo.Record
		for k := from; k < keys; k++ {
			key, value := fmt.Sprintf("key-%d", k), fmt.Sprintf("key-%d@%d", k, v)
			recs = append(recs, &kgo.Record{Key: []byte(key), Value: []byte(value)})
			latest[key] = value
		}
		return recs
	}
	for v := range versions {
		produceSync(t, idem, version(v, 0)...)
	}
	id, epoch := producerID(t, idem)

	// Another producer supersedes keys 2..4 of the idempotent producer's
	// last batch, and writes enough to close that batch's segment.
	other := newFranz(t, n, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	for v := versions; v < 2*versions; v++ {
		produceSync(t, other, version(v, 2)...)
	}
	if err := n.Broker().CompactNow(); err != nil {
		t.Fatalf("CompactNow: %v", err)
	}
	closeNode(t, n)
	removeProducerSnapshots(t, dir)
	n = startNode(t, nodetest.WithDataDir(dir), nodetest.WithConfig(func(c *node.Config) { c.KafkaAddr = addr }))

	produceSync(t, idem, version(2*versions, 0)...)
	if gotID, gotEpoch := producerID(t, idem); gotID != id || gotEpoch != epoch {
		t.Fatalf("producer is id %d epoch %d after the restart, was id %d epoch %d: the broker lost its state",
			gotID, gotEpoch, id, epoch)
	}

	end := endOffsets(t, newAdmin(t, n), topic)[0]
	state := map[string]string{}
	got := consumeTo(t, newConsumer(t, n, topic), end)
	offsets := make([]int64, len(got))
	for i, r := range got {
		if prev, seen := state[string(r.Key)]; seen && prev == string(r.Value) {
			t.Fatalf("key %s = %q written twice", r.Key, r.Value)
		}
		state[string(r.Key)] = string(r.Value)
		offsets[i] = r.Offset
	}
	for k, v := range latest {
		if state[k] != v {
			t.Fatalf("key %s = %q, want %q", k, state[k], v)
		}
	}
	// The emptied tail of the producer's last batch spans several offsets;
	// the other stock clients step over it as franz-go does.
	sameOffsets(t, "sarama", saramaOffsets(t, n, topic, end), offsets)
	sameOffsets(t, "kafka-go", kafkaGoOffsets(t, n, topic, end), offsets)
}

// producerID is the idempotent producer id and epoch cl writes with.
func producerID(t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	id, epoch, err := cl.ProducerID(testContext(t))
	if err != nil {
		t.Fatalf("ProducerID: %v", err)
	}
	return id, epoch
}

// closeNode closes n (a test's cleanup closing it again is harmless).
func closeNode(t *testing.T, n *node.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatalf("close node: %v", err)
	}
}

// removeProducerSnapshots deletes every partition's producer-state
// snapshot under dir, so the next start rebuilds producer state from the
// logs.
func removeProducerSnapshots(t *testing.T, dir string) {
	t.Helper()
	removed := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "producer-state.snapshot" {
			removed++
			err = os.Remove(path)
		}
		return err
	})
	if err != nil || removed == 0 {
		t.Fatalf("removing producer snapshots under %s: %v (%d removed)", dir, err, removed)
	}
}
