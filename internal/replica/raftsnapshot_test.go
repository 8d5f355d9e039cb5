package replica

import (
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// TestStageBatchesFromInsideAnEmptyBatch: a leader that caught up from a
// snapshot of a compacted log holds an empty batch over each gap it was
// sent (fillGap), spanning what were several batches in the log of a
// follower that had them. A follower whose high watermark lies inside that
// span asks from there, and the leader's read starts with the batch that
// contains the offset: the empty one, which begins below it. The follower
// must take the rest of that batch as a gap, not refuse the chunk: every
// retry would bring the same chunk, and it would never catch up (issue 13).
func TestStageBatchesFromInsideAnEmptyBatch(t *testing.T) {
	leader := openTestLocal(t, "leader")
	records := func(base int64, n int) []byte {
		recs := make([]record.Record, n)
		for i := range recs {
			recs[i] = record.Record{Key: []byte("k"), Value: []byte("v")}
		}
		b := record.NewBatch(1, recs)
		record.SetBaseOffset(b, base)
		return b
	}
	for _, b := range [][]byte{records(0, 3), record.EmptyBatch(3, 9), records(10, 2)} {
		if _, err := leader.AppendAt(b, 2); err != nil {
			t.Fatal(err)
		}
	}
	const hw, end = 7, 12 // the follower's high watermark, the snapshot's end
	chunk, err := readBelow(leader, hw, end, snapshotChunkBytes)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := record.ParseHeader(chunk); h.BaseOffset >= hw {
		t.Fatalf("the leader's read from %d starts at %d: the case under test is gone", hw, h.BaseOffset)
	}

	staged := openTestLocal(t, "staged")
	if err := staged.log.ResetTo(hw); err != nil {
		t.Fatal(err)
	}
	got, err := stageBatches(staged, chunk, end, 2)
	if err != nil {
		t.Fatalf("staging the chunk from %d: %v", hw, err)
	}
	if got != end || staged.StartOffset() != hw || staged.EndOffset() != end {
		t.Fatalf("staged [%d, %d), next %d; want [%d, %d)", staged.StartOffset(), staged.EndOffset(), got, hw, end)
	}
	b, err := readBelow(staged, 10, end, snapshotChunkBytes)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := record.ParseHeader(b); err != nil || h.BaseOffset != 10 || h.RecordCount != 2 {
		t.Fatalf("staged at 10: %+v, %v; want the leader's batch of 2 records", h, err)
	}
}

func openTestLocal(t *testing.T, name string) *Local {
	t.Helper()
	l, err := Open(t.TempDir()+"/"+name, DefaultConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
