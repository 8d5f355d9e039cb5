package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestRestartKeepsTopicsAndRecords acknowledges records with acks=all,
// closes the node, starts a new one on the same data directory and reads
// everything back with new clients: topics, their partitions and configs,
// and every acknowledged record at its offset.
func TestRestartKeepsTopicsAndRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startNode(t, nodetest.WithDataDir(dir))
	adm := newAdmin(t, first)
	topic := "durable"
	createTopic(t, adm, topic, 2, map[string]*string{"retention.ms": kadm.StringPtr("86400000")})
	producer := newFranz(t, first, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)})
	}
	produceSync(t, producer, recs...)
	producer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Close(ctx); err != nil {
		t.Fatalf("closing the first node: %v", err)
	}

	second := startNode(t, nodetest.WithDataDir(dir))
	adm2 := newAdmin(t, second)
	if got := partitionCount(t, adm2, topic); got != 2 {
		t.Fatalf("after restart %q has %d partitions, want 2", topic, got)
	}
	rcs, err := adm2.DescribeTopicConfigs(testContext(t), topic)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs after restart: %v", err)
	}
	if rc, err := rcs.On(topic, nil); err != nil || rc.Err != nil {
		t.Fatalf("DescribeTopicConfigs(%q) after restart: %v / %v", topic, err, rc.Err)
	} else {
		var retention string
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				retention = c.MaybeValue()
			}
		}
		if retention != "86400000" {
			t.Errorf("after restart retention.ms = %q, want the override 86400000", retention)
		}
	}

	got := consumeN(t, newConsumer(t, second, topic), len(recs))
	byPosition := make(map[[2]int64]string)
	for _, r := range recs {
		byPosition[[2]int64{int64(r.Partition), r.Offset}] = string(r.Value)
	}
	for _, r := range got {
		want, ok := byPosition[[2]int64{int64(r.Partition), r.Offset}]
		if !ok || want != string(r.Value) {
			t.Errorf("after restart %d/%d holds %q, before it was acknowledged as %q", r.Partition, r.Offset, r.Value, want)
		}
	}
}
