package record

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Record is one record of a batch.
type Record struct {
	// OffsetDelta is the record's offset minus the batch's BaseOffset.
	OffsetDelta int32
	// TimestampDelta is the record's timestamp minus the batch's
	// BaseTimestamp, in milliseconds.
	TimestampDelta int64
	// Key and Value are nil for null. A null Value is a tombstone.
	Key, Value []byte
	Headers    []RecordHeader
}

// RecordHeader is one key/value header of a record. A nil Value is null.
type RecordHeader struct {
	Key   string
	Value []byte
}

// minRecordSize is the fewest bytes one encoded record can take: a one-byte
// length varint and a body of attributes, timestamp delta, offset delta, key
// length, value length and header count, one byte each.
const minRecordSize = 7

// Records verifies the batch b starts with and returns its records,
// decompressed and decoded. It fails exactly when Validate fails. Keys,
// values and header values share one buffer that Records allocates; they do
// not alias b.
func Records(b []byte) ([]Record, error) {
	return records(b, MaxDecompressedSize)
}

func records(b []byte, limit int) ([]Record, error) {
	h, err := Verify(b)
	if err != nil {
		return nil, err
	}
	if err := checkLastOffsetDelta(h); err != nil {
		return nil, err
	}
	payload := b[HeaderSize:h.Size()]
	var data []byte
	if h.Compression() == None {
		data = append([]byte(nil), payload...)
	} else if data, err = decompress(h.Compression(), payload, limit); err != nil {
		return nil, err
	}
	// RecordCount is untrusted until the records decode; the bytes bound
	// how many there can be.
	recs := make([]Record, 0, min(int(h.RecordCount), len(data)/minRecordSize))
	r := recordReader{rest: data}
	for i := int32(0); i < h.RecordCount; i++ {
		raw, err := r.next(i)
		if err != nil {
			return nil, err
		}
		recs = append(recs, raw.record())
	}
	if err := r.finish(); err != nil {
		return nil, err
	}
	return recs, nil
}

// rawRecord is one record as it lies in the decoded records bytes; its
// slices alias them. headers holds headerCount encoded, already checked
// headers.
type rawRecord struct {
	offsetDelta    int32
	timestampDelta int64
	key, value     []byte
	headerCount    int32
	headers        []byte
}

// record converts r, decoding its headers.
func (r rawRecord) record() Record {
	rec := Record{OffsetDelta: r.offsetDelta, TimestampDelta: r.timestampDelta, Key: r.key, Value: r.value}
	if r.headerCount > 0 {
		rec.Headers = make([]RecordHeader, 0, r.headerCount)
		c := cursor{rest: r.headers}
		for range r.headerCount {
			key, _ := c.nullableBytes() // checked by recordReader.next
			value, _ := c.nullableBytes()
			rec.Headers = append(rec.Headers, RecordHeader{Key: string(key), Value: value})
		}
	}
	return rec
}

// recordReader walks the encoded records of a batch without allocating.
// The format of one record (varints are zig-zag, as in protobuf):
//
//	length         varint  bytes of the rest of the record
//	attributes     int8    unused
//	timestampDelta varlong
//	offsetDelta    varint
//	keyLength      varint  -1 for a null key
//	key            bytes
//	valueLength    varint  -1 for a null value
//	value          bytes
//	headerCount    varint
//	headers        headerCount × (keyLength varint ≥ 0, key, valueLength varint ≥ -1, value)
type recordReader struct {
	rest []byte
}

// next decodes record number i, which must carry offset delta i.
func (r *recordReader) next(i int32) (rawRecord, error) {
	c := cursor{rest: r.rest}
	length, ok := c.varint()
	if !ok {
		return rawRecord{}, corruptRecord(i, "bad length varint")
	}
	if length < 0 || int(length) > len(c.rest) {
		return rawRecord{}, corruptRecord(i, fmt.Sprintf("length %d with %d bytes left", length, len(c.rest)))
	}
	body := cursor{rest: c.rest[:length]}
	r.rest = c.rest[length:]

	var raw rawRecord
	if _, ok := body.take(1); !ok { // attributes
		return raw, corruptRecord(i, "no attributes")
	}
	if raw.timestampDelta, ok = body.varlong(); !ok {
		return raw, corruptRecord(i, "bad timestamp delta")
	}
	if raw.offsetDelta, ok = body.varint(); !ok {
		return raw, corruptRecord(i, "bad offset delta")
	}
	if raw.offsetDelta != i {
		return raw, corruptRecord(i, fmt.Sprintf("offset delta %d", raw.offsetDelta))
	}
	if raw.key, ok = body.nullableBytes(); !ok {
		return raw, corruptRecord(i, "bad key")
	}
	if raw.value, ok = body.nullableBytes(); !ok {
		return raw, corruptRecord(i, "bad value")
	}
	if raw.headerCount, ok = body.varint(); !ok || raw.headerCount < 0 {
		return raw, corruptRecord(i, "bad header count")
	}
	raw.headers = body.rest
	for h := int32(0); h < raw.headerCount; h++ {
		key, ok := body.nullableBytes()
		if !ok || key == nil {
			return raw, corruptRecord(i, fmt.Sprintf("header %d: bad key", h))
		}
		if _, ok := body.nullableBytes(); !ok {
			return raw, corruptRecord(i, fmt.Sprintf("header %d: bad value", h))
		}
	}
	if len(body.rest) != 0 {
		return raw, corruptRecord(i, fmt.Sprintf("%d bytes beyond its fields", len(body.rest)))
	}
	return raw, nil
}

// finish reports bytes left after the last record.
func (r *recordReader) finish() error {
	if len(r.rest) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", ErrCorrupt, len(r.rest))
	}
	return nil
}

func corruptRecord(i int32, what string) error {
	return fmt.Errorf("%w: record %d: %s", ErrCorrupt, i, what)
}

// cursor reads the primitive types of the record format from the front of
// a byte slice.
type cursor struct {
	rest []byte
}

func (c *cursor) varlong() (int64, bool) {
	v, n := binary.Varint(c.rest)
	if n <= 0 {
		return 0, false
	}
	c.rest = c.rest[n:]
	return v, true
}

func (c *cursor) varint() (int32, bool) {
	v, ok := c.varlong()
	if !ok || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

func (c *cursor) take(n int) ([]byte, bool) {
	if n > len(c.rest) {
		return nil, false
	}
	b := c.rest[:n:n]
	c.rest = c.rest[n:]
	return b, true
}

// nullableBytes reads a varint length (-1 for null) and that many bytes.
// A non-null result is a sub-slice of the non-empty record bytes, so it is
// never nil even when empty: null and empty stay apart.
func (c *cursor) nullableBytes() ([]byte, bool) {
	n, ok := c.varint()
	if !ok || n < -1 {
		return nil, false
	}
	if n == -1 {
		return nil, true
	}
	return c.take(int(n))
}
