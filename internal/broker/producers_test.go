package broker

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// idempotentBatch is a batch of n records from producer id/epoch starting
// at sequence seq, as an idempotent client would send it.
func idempotentBatch(id int64, epoch int16, seq int32, n int) []byte {
	values := make([]string, n)
	for i := range values {
		values[i] = "v"
	}
	b := batchOf(values...)
	binary.BigEndian.PutUint64(b[43:], uint64(id))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func produceOffset(t *testing.T, p *Partition, batch []byte) int64 {
	t.Helper()
	off, _, err := p.Produce(batch, -1)
	if err != nil {
		t.Fatalf("Produce: %v", err)
	}
	return off
}

func TestIdempotentProducer(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "idem"}, false)
	p, _ := tp.Partition(0)

	if off := produceOffset(t, p, idempotentBatch(7, 0, 0, 3)); off != 0 {
		t.Fatalf("first batch at %d", off)
	}
	if off := produceOffset(t, p, idempotentBatch(7, 0, 3, 2)); off != 3 {
		t.Fatalf("second batch at %d", off)
	}
	// A retry of the first batch (its response was lost) gets its offset back.
	if off := produceOffset(t, p, idempotentBatch(7, 0, 0, 3)); off != 0 {
		t.Errorf("retried batch answered with offset %d, want 0", off)
	}
	if p.EndOffset() != 5 {
		t.Errorf("retried batch was written again: end offset %d, want 5", p.EndOffset())
	}
	cases := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"gap", idempotentBatch(7, 0, 9, 1), ErrOutOfOrderSequence},
		{"new epoch not at 0", idempotentBatch(7, 1, 5, 1), ErrOutOfOrderSequence},
		{"unknown producer mid-stream", idempotentBatch(8, 0, 4, 1), ErrUnknownProducerID},
	}
	for _, c := range cases {
		if _, _, err := p.Produce(c.batch, -1); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if off := produceOffset(t, p, idempotentBatch(7, 1, 0, 1)); off != 5 {
		t.Errorf("new epoch's first batch at %d", off)
	}
	if _, _, err := p.Produce(idempotentBatch(7, 0, 5, 1), -1); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Errorf("old epoch after a bump: %v", err)
	}
}

func TestProducerStateSurvivesRestart(t *testing.T) {
	for _, clean := range []bool{true, false} {
		dir := t.TempDir()
		b := openTestBroker(t, dir)
		tp, _ := b.CreateTopic(TopicSpec{Name: "idem"}, false)
		p, _ := tp.Partition(0)
		produceOffset(t, p, idempotentBatch(3, 2, 0, 2))
		produceOffset(t, p, idempotentBatch(3, 2, 2, 2))
		b.Close()
		if !clean { // as after a crash: no snapshot, the log is replayed
			os.Remove(filepath.Join(dir, "idem-0", producerSnapshotFile))
		}

		b = openTestBroker(t, dir)
		tp, _ = b.Topic("idem")
		p, _ = tp.Partition(0)
		if off := produceOffset(t, p, idempotentBatch(3, 2, 2, 2)); off != 2 {
			t.Errorf("clean=%v: retry after restart answered %d, want 2", clean, off)
		}
		if off := produceOffset(t, p, idempotentBatch(3, 2, 4, 1)); off != 4 || p.EndOffset() != 5 {
			t.Errorf("clean=%v: next batch at %d, end %d", clean, off, p.EndOffset())
		}
		b.Close()
	}
}

func TestProducerExpiry(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "idem"}, false)
	p, _ := tp.Partition(0)
	produceOffset(t, p, idempotentBatch(3, 0, 0, 1))
	if err := p.maintainProducers(time.Now().Add(2 * defaultProducerIDExpirationMs * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Produce(idempotentBatch(3, 0, 1, 1), -1); !errors.Is(err, ErrUnknownProducerID) {
		t.Errorf("expired producer: %v, want ErrUnknownProducerID", err)
	}
}

func TestProducerIDsNeverRepeat(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	seen := map[int64]bool{}
	for i := 0; i < 3; i++ {
		id, err := b.AllocateProducerID()
		if err != nil || seen[id] {
			t.Fatalf("AllocateProducerID = %d, %v (seen %v)", id, err, seen)
		}
		seen[id] = true
	}
	b.Close()
	b = openTestBroker(t, dir)
	defer b.Close()
	for i := 0; i < producerIDsBlockSize+5; i++ {
		id, err := b.AllocateProducerID()
		if err != nil || seen[id] {
			t.Fatalf("after restart AllocateProducerID = %d, %v: repeated", id, err)
		}
		seen[id] = true
	}
}
