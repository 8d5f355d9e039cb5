package record

import (
	"errors"
	"fmt"
	"hash/crc32"
)

// MaxDecompressedSize bounds how large a compressed batch's records may be
// once decompressed, whatever the caller's limits: past it a batch is
// ErrTooLarge, so that a small produce request cannot make the broker
// inflate without limit (a "zip bomb") and every batch Validate accepts
// can be read back with Records.
const MaxDecompressedSize = 64 << 20

// ErrTooLarge reports a batch whose records, decompressed, are more than
// its limit allows (Limits.MaxSize, or MaxDecompressedSize).
var ErrTooLarge = errors.New("record: batch too large once decompressed")

// ErrNoKey reports a record without a key in a batch validated with
// Limits.KeyRequired.
var ErrNoKey = errors.New("record: record without a key")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum is the CRC-32C a batch of the given size should carry: over
// everything from the attributes to the end of the batch.
func checksum(batch []byte, size int) uint32 {
	return crc32.Checksum(batch[offAttributes:size], castagnoli)
}

// Verify is ParseHeader plus the CRC-32C check of the batch b starts with.
// b may extend beyond the batch; only its first Size() bytes are checked.
// A CRC mismatch is ErrCorrupt.
func Verify(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if got := checksum(b, h.Size()); got != h.CRC {
		return h, fmt.Errorf("%w: crc %#08x, header says %#08x", ErrCorrupt, got, h.CRC)
	}
	return h, nil
}

// Limits are what a topic requires of a batch beyond its own consistency.
type Limits struct {
	// MaxSize bounds the batch as it would be uncompressed: HeaderSize
	// plus its records decompressed (Kafka's max.message.bytes counts the
	// same bytes for an uncompressed batch). Past it: ErrTooLarge. 0 means
	// no bound but MaxDecompressedSize.
	MaxSize int
	// KeyRequired refuses a record with a null key (ErrNoKey), as Kafka
	// does on a compacted topic.
	KeyRequired bool
}

// recordBytes is how many bytes of records, decompressed, l allows.
func (l Limits) recordBytes() int {
	if l.MaxSize <= 0 {
		return MaxDecompressedSize
	}
	return min(max(l.MaxSize-HeaderSize, 0), MaxDecompressedSize)
}

// Validate is ValidateWithin with no limits but MaxDecompressedSize.
func Validate(b []byte) (Header, error) {
	return ValidateWithin(b, Limits{})
}

// ValidateWithin is Verify plus a full decode of every record, decompressing
// if needed: what a broker does before accepting a produced batch. Beyond
// Verify it checks that the codec is known, that exactly RecordCount
// records decode with offset deltas 0..RecordCount-1 and self-consistent
// lengths and nothing after them, and, for a non-empty non-control batch,
// that LastOffsetDelta is RecordCount-1; any failure there is ErrCorrupt.
// Records that decompress past l's bound are ErrTooLarge, a missing key
// where l requires one ErrNoKey.
//
// A compressed batch is decoded as a stream: records are checked as they
// come out of the decoder, so what is held at once is the decoder's state
// and the largest record, not the whole decompressed batch, and
// decompression stops as soon as the bound is passed. At most GOMAXPROCS
// batches are decompressed at once in the process (decompress.go); a
// caller beyond that waits its turn.
//
// An empty batch (RecordCount 0) is accepted, as the storage format allows
// it; Kafka refuses one in a produce request, which is the caller's call.
//
// For an uncompressed batch ValidateWithin does not allocate.
func ValidateWithin(b []byte, l Limits) (Header, error) {
	h, err := Verify(b)
	if err != nil {
		return h, err
	}
	if err := checkLastOffsetDelta(h); err != nil {
		return h, err
	}
	payload, limit := b[HeaderSize:h.Size()], l.recordBytes()
	if h.Compression() == None {
		if len(payload) > limit {
			return h, fmt.Errorf("%w: %d bytes of records, at most %d allowed", ErrTooLarge, len(payload), limit)
		}
		s := wholeRecords(payload)
		return h, checkRecords(h, &s, l.KeyRequired)
	}
	inf := acquireInflater()
	defer inf.release()
	s, err := inf.records(h.Compression(), payload, limit)
	if err != nil {
		return h, err
	}
	return h, checkRecords(h, s, l.KeyRequired)
}

// checkLastOffsetDelta compares the header's two ways of counting records
// before any decoding, so that an inconsistent header fails cheaply.
func checkLastOffsetDelta(h Header) error {
	if h.RecordCount > 0 && !h.Control() && h.LastOffsetDelta != h.RecordCount-1 {
		return fmt.Errorf("%w: last offset delta %d with %d records", ErrCorrupt, h.LastOffsetDelta, h.RecordCount)
	}
	return nil
}

// checkRecords decodes, without keeping, the h.RecordCount records that s
// must yield exactly.
func checkRecords(h Header, s *recordStream, keyRequired bool) error {
	for i := int32(0); i < h.RecordCount; i++ {
		window, err := s.fill()
		if err != nil {
			return err
		}
		r := recordReader{rest: window}
		raw, err := r.next(i)
		if err != nil {
			return err
		}
		if keyRequired && raw.key == nil {
			return fmt.Errorf("%w: record %d", ErrNoKey, i)
		}
		s.consume(len(window) - len(r.rest))
	}
	return s.finish()
}

// Split cuts a produce request's records field into its batches, each
// checked with Verify. The returned slices alias b, each capped at its
// batch's end. An empty b yields no batches. A trailing partial batch is
// ErrShort; errors say at which byte of b the failing batch starts.
func Split(b []byte) ([][]byte, error) {
	var batches [][]byte
	for pos := 0; pos < len(b); {
		h, err := Verify(b[pos:])
		if err != nil {
			return nil, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		end := pos + h.Size()
		batches = append(batches, b[pos:end:end])
		pos = end
	}
	return batches, nil
}
