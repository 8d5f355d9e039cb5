package broker

import (
	"os"
	"path/filepath"
	"testing"
)

// A compacted topic keeps what producer state needs of an idempotent
// producer's last batch even when later writes supersede all its records
// (seglog's compaction leaves the batch's header, emptied). So after a
// restart that rebuilds producer state from the log alone (no snapshot, as
// after a crash or on a replica taking the lead), a retry of that batch is
// still answered as a duplicate with its original offset instead of being
// written a second time, and the producer's next batch is in sequence.
func TestProducerStateSurvivesCompaction(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	tp, err := b.CreateTopic(TopicSpec{Name: "idem", Partitions: 1,
		Configs: map[string]string{"segment.bytes": "1024", "cleanup.policy": "compact"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := tp.Partition(0)
	produceOffset(t, p, idempotentBatch(3, 0, 0, 3)) // keys k0..k2
	produceVersions(t, p, 3, 30)                     // supersede them, closing segments
	if err := b.CompactNow(); err != nil {
		t.Fatal(err)
	}
	end := p.EndOffset()
	b.Close()
	if err := os.Remove(filepath.Join(dir, "idem-0", producerSnapshotFile)); err != nil {
		t.Fatal(err)
	}

	b = openTestBroker(t, dir)
	defer b.Close()
	tp, _ = b.Topic("idem")
	p, _ = tp.Partition(0)
	if off := produceOffset(t, p, idempotentBatch(3, 0, 0, 3)); off != 0 || p.EndOffset() != end {
		t.Fatalf("retry after compaction and restart answered %d with end offset %d, want 0 and %d (not written again)",
			off, p.EndOffset(), end)
	}
	if off := produceOffset(t, p, idempotentBatch(3, 0, 3, 1)); off != end {
		t.Fatalf("next batch at %d, want %d", off, end)
	}
}
