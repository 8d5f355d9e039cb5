package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// keyedBatch builds a batch of records key=value from pairs; a "" key is a
// record without key.
func keyedBatch(pairs ...string) []byte {
	var recs []record.Record
	for i := 0; i+1 < len(pairs); i += 2 {
		r := record.Record{Value: []byte(pairs[i+1])}
		if pairs[i] != "" {
			r.Key = []byte(pairs[i])
		}
		recs = append(recs, r)
	}
	return record.NewBatch(time.Now().UnixMilli(), recs)
}

func TestCompactedTopicRejectsRecordWithoutKey(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	for _, policy := range []string{"compact", "compact,delete", "delete, compact"} {
		topic, err := b.CreateTopic(TopicSpec{Name: "t" + fmt.Sprint(len(policy)), Partitions: 1,
			Configs: map[string]string{"cleanup.policy": policy}}, false)
		if err != nil {
			t.Fatalf("cleanup.policy=%q: %v", policy, err)
		}
		p, _ := topic.Partition(0)
		if _, _, err := p.Produce(keyedBatch("k", "v", "", "no key"), -1); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("cleanup.policy=%q: produce without key: %v, want ErrInvalidRecord", policy, err)
		}
		if p.EndOffset() != 0 {
			t.Fatalf("cleanup.policy=%q: the refused batch was written", policy)
		}
		if _, _, err := p.Produce(keyedBatch("k", "v"), -1); err != nil {
			t.Fatalf("cleanup.policy=%q: produce with key: %v", policy, err)
		}
	}
	plain, err := b.CreateTopic(TopicSpec{Name: "plain", Partitions: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := plain.Partition(0)
	if _, _, err := p.Produce(keyedBatch("", "no key"), -1); err != nil {
		t.Fatalf("a delete-policy topic must take records without key: %v", err)
	}
}

func TestCompactionTopicConfigs(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	for _, bad := range []map[string]string{
		{"cleanup.policy": "compact,shred"},
		{"cleanup.policy": ""},
		{"min.cleanable.dirty.ratio": "1.5"},
		{"min.cleanable.dirty.ratio": "half"},
		{"delete.retention.ms": "-1"},
		{"min.compaction.lag.ms": "-5"},
		{"max.compaction.lag.ms": "0"},
		{"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "999"},
	} {
		if _, err := b.CreateTopic(TopicSpec{Name: "bad", Partitions: 1, Configs: bad}, false); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%v: %v, want ErrInvalidConfig", bad, err)
		}
	}
	configs := map[string]string{
		"cleanup.policy":            "compact,delete",
		"delete.retention.ms":       "5",
		"min.cleanable.dirty.ratio": "0.25",
		"min.compaction.lag.ms":     "7",
		"max.compaction.lag.ms":     "9000",
	}
	topic, err := b.CreateTopic(TopicSpec{Name: "good", Partitions: 1, Configs: configs}, false)
	if err != nil {
		t.Fatal(err)
	}
	lc := topic.currentConfig().logConfig()
	if !lc.Compact || !lc.Delete || lc.DeleteRetentionMs != 5 || lc.MinCleanableDirtyRatio != 0.25 ||
		lc.MinCompactionLagMs != 7 || lc.MaxCompactionLagMs != 9000 {
		t.Fatalf("log config %+v", lc)
	}
	for _, e := range topic.Configs() {
		if want, ok := configs[e.Name]; ok && (e.Value != want || e.IsDefault) {
			t.Fatalf("%s = %q (default %v), want %q", e.Name, e.Value, e.IsDefault, want)
		}
	}
	defaults := topicConfig{}.logConfig()
	if defaults.Compact || !defaults.Delete || defaults.DeleteRetentionMs != 86400000 || defaults.MinCleanableDirtyRatio != 0.5 {
		t.Fatalf("default log config %+v", defaults)
	}
}

// produceVersions writes versions rounds of keys k0..k(keys-1) to p, one
// batch per round, and returns the expected latest value of each key.
func produceVersions(t *testing.T, p *Partition, keys, versions int) map[string]string {
	t.Helper()
	latest := map[string]string{}
	for v := 0; v < versions; v++ {
		var pairs []string
		for k := 0; k < keys; k++ {
			key, value := fmt.Sprint("k", k), fmt.Sprintf("k%d-v%d", k, v)
			pairs = append(pairs, key, value)
			latest[key] = value
		}
		if _, _, err := p.Produce(keyedBatch(pairs...), -1); err != nil {
			t.Fatal(err)
		}
	}
	return latest
}

func TestCompactNowCompactsOnlyCompactedTopics(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	small := map[string]string{"segment.bytes": "1024"}
	compacted := map[string]string{"segment.bytes": "1024", "cleanup.policy": "compact"}
	plainTopic, err := b.CreateTopic(TopicSpec{Name: "plain", Partitions: 1, Configs: small}, false)
	if err != nil {
		t.Fatal(err)
	}
	compactTopic, err := b.CreateTopic(TopicSpec{Name: "table", Partitions: 2, Configs: compacted}, false)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := plainTopic.Partition(0)
	produceVersions(t, plain, 10, 30)
	table, _ := compactTopic.Partition(1)
	latest := produceVersions(t, table, 10, 30)
	end := table.EndOffset()

	if err := b.CompactNow(); err != nil {
		t.Fatal(err)
	}
	if n := len(readValues(t, plain)); n != 300 {
		t.Fatalf("the delete-policy topic lost records: %d of 300", n)
	}
	values := readValues(t, table)
	if len(values) >= 100 {
		t.Fatalf("%d records left after compaction, want far fewer than 300", len(values))
	}
	state := map[string]bool{}
	for _, v := range values {
		state[v] = true
	}
	for k, v := range latest {
		if !state[v] {
			t.Fatalf("latest value of %s (%q) missing after compaction", k, v)
		}
	}
	if table.EndOffset() != end {
		t.Fatalf("end offset %d, was %d", table.EndOffset(), end)
	}
}

func TestCleanerLoopCompactsAndStopsOnClose(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	topic, err := b.CreateTopic(TopicSpec{Name: "table", Partitions: 1,
		Configs: map[string]string{"segment.bytes": "1024", "cleanup.policy": "compact"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := topic.Partition(0)
	produceVersions(t, p, 10, 30)
	before := p.Size()

	b.bg.Add(1)
	go b.cleanerLoop(5 * time.Millisecond)
	// The loop runs on its own clock: poll, with a deadline, for its work.
	deadline := time.Now().Add(10 * time.Second)
	for p.Size() >= before {
		if time.Now().After(deadline) {
			t.Fatal("the cleaner loop did not compact the topic")
		}
		time.Sleep(5 * time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the cleaner loop")
	}
}
