package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// metadataSnapshot is what a restart must give back of the metadata log:
// every live topic (id, partitions, configs) and every live definition.
type metadataSnapshot struct {
	topics      map[string]string
	definitions map[string]string
}

func snapshotMetadata(t *testing.T, b *Broker) metadataSnapshot {
	t.Helper()
	s := metadataSnapshot{topics: map[string]string{}, definitions: map[string]string{}}
	for _, tp := range b.Topics() {
		s.topics[tp.Name()] = fmt.Sprintf("%x %d %v", tp.ID(), len(tp.Partitions()), tp.Configs())
	}
	if err := b.Definitions().Load(func(key string, value []byte) error {
		s.definitions[key] = string(value)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// metadataLogBytes is the bytes of the metadata log's segments (in a
// cluster, in the replica's "log" directory).
func metadataLogBytes(t *testing.T, dataDir string) int64 {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dataDir, metadataLogName, "*.log"))
	if err == nil && len(segs) == 0 {
		segs, err = filepath.Glob(filepath.Join(dataDir, metadataLogName, "log", "*.log"))
	}
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range segs {
		fi, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// TestMetadataLogCompacts: 1,000 topics created and deleted and 1,000
// definitions (queues) put and deleted leave, once the cleaner ran past
// delete.retention.ms, a metadata log of a small part of its size, and a
// restart replays the compacted log to the same topics, configs and
// definitions. On a log that is never compacted it keeps every record.
func TestMetadataLogCompacts(t *testing.T) {
	dir := t.TempDir()
	// The churn goes to one segment, the active one, which no pass of the
	// broker's own cleaner loop touches whatever the time the churn takes;
	// reopened with small segments, the next write rolls it.
	b := openTestBroker(t, dir)
	for i := range 3 {
		if _, err := b.CreateTopic(TopicSpec{Name: fmt.Sprintf("kept-%d", i), Partitions: int32(i + 1),
			Configs: map[string]string{"retention.ms": fmt.Sprint(1000 * (i + 1))}}, false); err != nil {
			t.Fatal(err)
		}
		if err := b.Definitions().Put(fmt.Sprintf("queue/kept-%d", i), []byte(`{"durable":true}`)); err != nil {
			t.Fatal(err)
		}
	}
	const churn = 1000
	for i := range churn {
		name := fmt.Sprintf("churn-%d", i)
		if _, err := b.CreateTopic(TopicSpec{Name: name, Configs: map[string]string{"cleanup.policy": "compact"}}, false); err != nil {
			t.Fatal(err)
		}
		if err := b.DeleteTopic(name); err != nil {
			t.Fatal(err)
		}
		if err := b.Definitions().Put("queue/"+name, []byte(`{"durable":true}`)); err != nil {
			t.Fatal(err)
		}
		if err := b.Definitions().Delete("queue/" + name); err != nil {
			t.Fatal(err)
		}
	}
	// A topic deleted and created again under its name: the new one is live.
	for range 2 {
		if _, err := b.CreateTopic(TopicSpec{Name: "reborn", Partitions: 2}, false); err != nil {
			t.Fatal(err)
		}
		if err := b.DeleteTopic("reborn"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.CreateTopic(TopicSpec{Name: "reborn", Partitions: 4}, false); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	smallSegments := func(c *Config) { c.MetadataLogSegmentBytes = 16 << 10 }
	b = openTestBroker(t, dir, smallSegments)
	if err := b.Definitions().Put("queue/after-restart", []byte(`{"durable":true}`)); err != nil {
		t.Fatal(err)
	}
	want := snapshotMetadata(t, b)
	before := metadataLogBytes(t, dir)

	// Past delete.retention.ms (24 h), the tombstones go too.
	if err := b.compactAll(context.Background(), time.Now().Add(25*time.Hour)); err != nil {
		t.Fatal(err)
	}
	after := metadataLogBytes(t, dir)
	if got := snapshotMetadata(t, b); !reflect.DeepEqual(got, want) {
		t.Fatalf("compaction changed the live state:\n got %v\nwant %v", got, want)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("metadata log: %d bytes before compaction, %d after", before, after)
	if after*10 > before {
		t.Fatalf("metadata log %d bytes after compaction, %d before: it should have shrunk tenfold", after, before)
	}

	b = openTestBroker(t, dir, smallSegments)
	defer b.Close()
	got := snapshotMetadata(t, b)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("state after restart differs:\n got %v\nwant %v", got, want)
	}
	if n := len(got.topics); n != 4 {
		t.Errorf("%d topics after restart, want 4: %v", n, got.topics)
	}
}

// TestProducerIDBlocksSurviveCompaction: two nodes asking for producer id
// blocks at once, from the same applied end, get blocks that never
// overlap (the second is refused and asks again above), and a replay of
// each key's newest record, in log order, ends above every block granted
// (a cluster's compaction keeps more: TestMetadataCompactionKeepsAppliedState),
// so no id is handed out twice after a restart. The old request record (a size added to a running sum) gave,
// after compaction, the end of one block only.
func TestProducerIDBlocksSurviveCompaction(t *testing.T) {
	const size = 1000
	st := newMetadataState()
	var log []record.Record
	var granted [][2]int64
	// ask appends node's request for the block at start (the end of the
	// blocks as that node applied them) and reports whether it was granted.
	ask := func(node int32, start int64) bool {
		t.Helper()
		req := producerIDBlockRequest(node, start, size)
		v, err := json.Marshal(req.value)
		if err != nil {
			t.Fatal(err)
		}
		r := record.Record{Key: []byte(req.key), Value: v}
		log = append(log, r)
		if err := st.apply(r); err != nil {
			t.Fatal(err)
		}
		block := st.producerBlocks[node]
		if block != [2]int64{start, start + size} {
			return false
		}
		for _, g := range granted {
			if block[0] < g[1] && g[0] < block[1] {
				t.Fatalf("block %v overlaps %v", block, g)
			}
		}
		granted = append(granted, block)
		return true
	}
	for range 5 {
		// Nodes 1 and 2 ask from the same end: node 2 is refused and
		// asks again from the end it then applied; node 3 asks alone.
		seen := st.producerIDBlockEnd
		if !ask(1, seen) || ask(2, seen) {
			t.Fatal("of two requests from one end, the first must be granted and the second refused")
		}
		if !ask(2, st.producerIDBlockEnd) || !ask(3, st.producerIDBlockEnd) {
			t.Fatal("a request from the applied end was refused")
		}
	}

	compacted := newMetadataState()
	newest := map[string]int{}
	for i, r := range log {
		newest[string(r.Key)] = i
	}
	for i, r := range log {
		if newest[string(r.Key)] == i {
			if err := compacted.apply(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	var top int64
	for _, g := range granted {
		top = max(top, g[1])
	}
	if compacted.producerIDBlockEnd < top {
		t.Fatalf("after compaction the next block starts at %d, below granted ids up to %d", compacted.producerIDBlockEnd, top)
	}
}
