package record

import (
	"encoding/binary"
	"math/bits"
)

// Builder accumulates records and encodes them as one uncompressed batch,
// for the broker's own internal logs. The zero Builder is empty and ready.
type Builder struct {
	buf               []byte // HeaderSize bytes reserved for the header, then the encoded records
	count             int32
	maxTimestampDelta int64
}

// Append encodes r as the next record. Its OffsetDelta is ignored: the
// record gets the next delta, Len() before the call.
func (b *Builder) Append(r Record) {
	if len(b.buf) < HeaderSize {
		b.buf = append(b.buf, make([]byte, HeaderSize)...)
	}
	if b.count == 0 || r.TimestampDelta > b.maxTimestampDelta {
		b.maxTimestampDelta = r.TimestampDelta
	}
	b.buf = appendRecord(b.buf, r, b.count)
	b.count++
}

// Len is the number of records appended so far.
func (b *Builder) Len() int { return int(b.count) }

// Size is the number of bytes the batch Build returns would take.
func (b *Builder) Size() int { return max(len(b.buf), HeaderSize) }

// Reset empties the builder, keeping its buffer.
func (b *Builder) Reset() {
	b.buf = b.buf[:0]
	b.count = 0
	b.maxTimestampDelta = 0
}

// Build returns a new batch holding the appended records: BaseOffset 0,
// PartitionLeaderEpoch -1, no compression, create-time timestamps from
// baseTimestamp, MaxTimestamp the latest record timestamp, ProducerID,
// ProducerEpoch and BaseSequence -1 (no idempotence), and the CRC set. The
// builder keeps its records; Build may be called again.
//
// A builder with no records yields a batch with RecordCount 0,
// LastOffsetDelta 0 and MaxTimestamp baseTimestamp; logs should not be
// given one.
func (b *Builder) Build(baseTimestamp int64) []byte {
	batch := make([]byte, b.Size())
	copy(batch, b.buf)
	b.writeHeader(batch, baseTimestamp)
	return batch
}

// writeHeader fills in the first HeaderSize bytes of batch, which holds the
// builder's records after them.
func (b *Builder) writeHeader(batch []byte, baseTimestamp int64) {
	be := binary.BigEndian
	h := batch[:0]
	h = be.AppendUint64(h, 0)                                         // BaseOffset
	h = be.AppendUint32(h, uint32(len(batch)-LogOverhead))            // BatchLength
	h = be.AppendUint32(h, ^uint32(0))                                // PartitionLeaderEpoch -1
	h = append(h, supportedMagic)                                     // Magic
	h = be.AppendUint32(h, 0)                                         // CRC, set below
	h = be.AppendUint16(h, 0)                                         // Attributes
	h = be.AppendUint32(h, uint32(max(b.count-1, 0)))                 // LastOffsetDelta
	h = be.AppendUint64(h, uint64(baseTimestamp))                     // BaseTimestamp
	h = be.AppendUint64(h, uint64(baseTimestamp+b.maxTimestampDelta)) // MaxTimestamp
	h = be.AppendUint64(h, ^uint64(0))                                // ProducerID -1
	h = be.AppendUint16(h, ^uint16(0))                                // ProducerEpoch -1
	h = be.AppendUint32(h, ^uint32(0))                                // BaseSequence -1
	_ = be.AppendUint32(h, uint32(b.count))                           // RecordCount
	be.PutUint32(batch[offCRC:], checksum(batch, len(batch)))
}

// NewBatch builds an uncompressed batch of recs as a Builder would: records
// get offset deltas 0..len(recs)-1 whatever their OffsetDelta says (recs is
// not modified), and MaxTimestamp is the latest baseTimestamp+TimestampDelta.
func NewBatch(baseTimestamp int64, recs []Record) []byte {
	size := HeaderSize
	for i, r := range recs {
		body := recordBodySize(r, int32(i))
		size += varintSize(int64(body)) + body
	}
	b := Builder{buf: make([]byte, HeaderSize, size)}
	for _, r := range recs {
		b.Append(r)
	}
	// The builder is discarded, so its buffer can be the batch.
	b.writeHeader(b.buf, baseTimestamp)
	return b.buf
}

// EmptyBatch is a batch with no records covering the offsets [first,
// last] (at most MaxInt32 apart), with no timestamp (-1): what a log holds
// where compaction left no record in a range whose offsets must still be
// accounted for. Kafka's cleaner leaves such batches too; consumers move
// past their last offset.
func EmptyBatch(first, last int64) []byte {
	b := NewBatch(-1, nil)
	SetBaseOffset(b, first)
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(last-first))
	binary.BigEndian.PutUint32(b[offCRC:], checksum(b, len(b)))
	return b
}

// appendRecord encodes r with the given offset delta in the record format
// recordReader describes.
func appendRecord(dst []byte, r Record, offsetDelta int32) []byte {
	dst = binary.AppendVarint(dst, int64(recordBodySize(r, offsetDelta)))
	dst = append(dst, 0) // attributes: unused
	dst = binary.AppendVarint(dst, r.TimestampDelta)
	dst = binary.AppendVarint(dst, int64(offsetDelta))
	dst = appendNullableBytes(dst, r.Key)
	dst = appendNullableBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendNullableBytes(dst, h.Value)
	}
	return dst
}

// recordBodySize is how many bytes appendRecord writes after the length.
func recordBodySize(r Record, offsetDelta int32) int {
	n := 1 + varintSize(r.TimestampDelta) + varintSize(int64(offsetDelta)) +
		nullableBytesSize(r.Key) + nullableBytesSize(r.Value) + varintSize(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintSize(int64(len(h.Key))) + len(h.Key) + nullableBytesSize(h.Value)
	}
	return n
}

func appendNullableBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func nullableBytesSize(b []byte) int {
	if b == nil {
		return varintSize(-1)
	}
	return varintSize(int64(len(b))) + len(b)
}

// varintSize is the length of v as a zig-zag varint: 7 bits per byte.
func varintSize(v int64) int {
	zigzag := uint64(v<<1) ^ uint64(v>>63)
	return (bits.Len64(zigzag|1) + 6) / 7
}
