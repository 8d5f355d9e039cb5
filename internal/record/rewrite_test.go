package record

import (
	"testing"
)

func TestSetBaseOffset(t *testing.T) {
	b := NewBatch(0, sampleRecords())
	SetBaseOffset(b, 1<<40+3)
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 1<<40+3 || h.LastOffset() != 1<<40+3+int64(len(sampleRecords())-1) {
		t.Fatalf("BaseOffset %d LastOffset %d", h.BaseOffset, h.LastOffset())
	}
}

func TestSetLogAppendTime(t *testing.T) {
	recs := withOffsetDeltas(sampleRecords())
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			b := franzBatch(t, c, int32(len(recs)), franzRecords(recs), transactionalBit)
			// Followed by another batch: only this one's bytes change.
			next := NewBatch(0, recs[:1])
			buf := append(append([]byte(nil), b...), next...)
			SetLogAppendTime(buf, 1_800_000_000_000)
			h, err := Validate(buf)
			if err != nil {
				t.Fatalf("after SetLogAppendTime: %v", err)
			}
			if !h.LogAppendTime() || h.MaxTimestamp != 1_800_000_000_000 {
				t.Fatalf("LogAppendTime %v MaxTimestamp %d", h.LogAppendTime(), h.MaxTimestamp)
			}
			if h.Compression() != c.attr || !h.Transactional() || h.BaseTimestamp != 1_700_000_000_000 {
				t.Fatalf("other fields changed: %+v", h)
			}
			if _, err := Verify(buf[h.Size():]); err != nil {
				t.Fatalf("following batch: %v", err)
			}
			// Idempotent: setting it again keeps the bit and the CRC valid.
			SetLogAppendTime(buf, 5)
			if h, err := Verify(buf); err != nil || h.MaxTimestamp != 5 || !h.LogAppendTime() {
				t.Fatalf("second SetLogAppendTime: %+v %v", h, err)
			}
		})
	}
}

// The leader epoch is stamped without touching the CRC: Kafka's CRC-32C
// covers the batch from its attributes on, and PartitionLeaderEpoch lies
// before them, so the batch still verifies.
func TestSetPartitionLeaderEpochKeepsTheCRC(t *testing.T) {
	recs := withOffsetDeltas(sampleRecords())
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			b := franzBatch(t, c, int32(len(recs)), franzRecords(recs), 0)
			before, err := Verify(b)
			if err != nil {
				t.Fatal(err)
			}
			SetPartitionLeaderEpoch(b, 7)
			h, err := Verify(b)
			if err != nil {
				t.Fatalf("after SetPartitionLeaderEpoch: %v", err)
			}
			if h.PartitionLeaderEpoch != 7 || h.CRC != before.CRC {
				t.Fatalf("epoch %d crc %#x, want 7 and the old crc %#x", h.PartitionLeaderEpoch, h.CRC, before.CRC)
			}
		})
	}
}
