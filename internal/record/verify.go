package record

import (
	"fmt"
	"hash/crc32"
)

// MaxDecompressedSize bounds how large a compressed batch's records may be
// once decompressed. A batch that would inflate beyond it is ErrCorrupt, so
// a small produce request cannot make the broker allocate without limit (a
// "zip bomb").
const MaxDecompressedSize = 64 << 20

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

// Validate is Verify plus a full decode of every record, decompressing if
// needed: what a broker does before accepting a produced batch. Beyond
// Verify it checks that the codec is known, that the records decompress to
// at most MaxDecompressedSize bytes, that exactly RecordCount records decode
// with offset deltas 0..RecordCount-1 and self-consistent lengths and
// nothing after them, and, for a non-empty non-control batch, that
// LastOffsetDelta is RecordCount-1. Any failure is ErrCorrupt.
//
// An empty batch (RecordCount 0) is accepted, as the storage format allows
// it; Kafka refuses one in a produce request, which is the caller's call.
//
// For an uncompressed batch Validate does not allocate.
func Validate(b []byte) (Header, error) {
	return validate(b, MaxDecompressedSize)
}

func validate(b []byte, limit int) (Header, error) {
	h, err := Verify(b)
	if err != nil {
		return h, err
	}
	if err := checkLastOffsetDelta(h); err != nil {
		return h, err
	}
	payload := b[HeaderSize:h.Size()]
	if h.Compression() == None {
		return h, checkRecords(h, payload)
	}
	buf := getScratch()
	defer putScratch(buf)
	records, err := decompress(h.Compression(), (*buf)[:0], payload, limit)
	*buf = records // keep the grown buffer for the next caller
	if err != nil {
		return h, err
	}
	return h, checkRecords(h, records)
}

// checkLastOffsetDelta compares the header's two ways of counting records
// before any decoding, so that an inconsistent header fails cheaply.
func checkLastOffsetDelta(h Header) error {
	if h.RecordCount > 0 && !h.Control() && h.LastOffsetDelta != h.RecordCount-1 {
		return fmt.Errorf("%w: last offset delta %d with %d records", ErrCorrupt, h.LastOffsetDelta, h.RecordCount)
	}
	return nil
}

// checkRecords decodes, without keeping, the h.RecordCount records that
// records must hold exactly.
func checkRecords(h Header, records []byte) error {
	r := recordReader{rest: records}
	for i := int32(0); i < h.RecordCount; i++ {
		if _, err := r.next(i); err != nil {
			return err
		}
	}
	return r.finish()
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
