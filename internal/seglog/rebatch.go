package seglog

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/wharf-mq/wharf/internal/record"
)

// Re-encoding what compaction keeps of a batch. record.NewBatch builds the
// records; the header fields NewBatch does not take (offset, leader epoch,
// timestamp type, transactional flag, producer id, epoch and sequence) are
// then copied from the source batch and the CRC recomputed. The byte
// positions are those of the v2 batch header (see package record's doc).
const (
	batchOffCRC             = 17
	batchOffAttributes      = 21
	batchOffLastOffsetDelta = 23
	batchOffMaxTimestamp    = 35
	batchOffProducerID      = 43
	batchOffProducerEpoch   = 51
	batchOffBaseSequence    = 53

	attrLogAppendTime = 0x08
	attrTransactional = 0x10
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// rebuildRun encodes recs, the records of src at consecutive offsets from
// src.BaseOffset+firstDelta, as one uncompressed batch with the same
// offsets, timestamps, headers and producer fields. recs' TimestampDelta
// stay relative to src.BaseTimestamp, which the new batch keeps.
func rebuildRun(src record.Header, firstDelta int32, recs []record.Record) []byte {
	b := record.NewBatch(src.BaseTimestamp, recs)
	copySourceFields(b, src, firstDelta)
	return b
}

// emptyTail is a batch with no records covering src's offsets from
// firstDelta to its last, with src's largest timestamp and producer fields
// (the base sequence that of offset firstDelta): what stays of the end of
// src when compaction removes it but the offset after it, or the producer's
// last sequence, must remain known.
func emptyTail(src record.Header, firstDelta int32) []byte {
	b := record.NewBatch(src.MaxTimestamp, nil)
	binary.BigEndian.PutUint32(b[batchOffLastOffsetDelta:], uint32(src.LastOffsetDelta-firstDelta))
	copySourceFields(b, src, firstDelta)
	return b
}

// copySourceFields makes batch b (built by record.NewBatch) start at src's
// offset firstDelta and carry src's other header fields, then re-signs it.
func copySourceFields(b []byte, src record.Header, firstDelta int32) {
	be := binary.BigEndian
	record.SetBaseOffset(b, src.BaseOffset+int64(firstDelta))
	record.SetPartitionLeaderEpoch(b, src.PartitionLeaderEpoch)
	attrs := be.Uint16(b[batchOffAttributes:]) | uint16(src.Attributes)&(attrLogAppendTime|attrTransactional)
	be.PutUint16(b[batchOffAttributes:], attrs)
	if src.LogAppendTime() {
		// Every record of a log-append-time batch has its MaxTimestamp.
		be.PutUint64(b[batchOffMaxTimestamp:], uint64(src.MaxTimestamp))
	}
	be.PutUint64(b[batchOffProducerID:], uint64(src.ProducerID))
	be.PutUint16(b[batchOffProducerEpoch:], uint16(src.ProducerEpoch))
	be.PutUint32(b[batchOffBaseSequence:], uint32(addSequence(src.BaseSequence, firstDelta)))
	be.PutUint32(b[batchOffCRC:], crc32.Checksum(b[batchOffAttributes:], crc32c))
}

// addSequence advances a producer sequence number, which wraps from
// MaxInt32 to 0 as in Kafka; -1 (no sequence) stays -1.
func addSequence(seq, n int32) int32 {
	if seq < 0 {
		return seq
	}
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}
