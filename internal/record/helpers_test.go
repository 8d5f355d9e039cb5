package record

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// codec is one way a client compresses a batch's records.
type codec struct {
	name     string
	attr     Compression
	compress func(tb testing.TB, records []byte) []byte
}

var codecs = []codec{
	{"none", None, func(_ testing.TB, b []byte) []byte { return b }},
	{"gzip", Gzip, gzipCompress},
	{"snappy-raw", Snappy, func(_ testing.TB, b []byte) []byte { return snappy.Encode(nil, b) }},
	{"snappy-xerial", Snappy, xerialCompress},
	{"lz4", LZ4, lz4Compress},
	{"zstd", Zstd, zstdCompress},
}

func gzipCompress(tb testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// xerialCompress frames b the way snappy-java (Java Kafka clients) does,
// in small blocks so that multi-block input is exercised.
func xerialCompress(_ testing.TB, b []byte) []byte {
	out := []byte(xerialMagic)
	out = binary.BigEndian.AppendUint32(out, 1) // version
	out = binary.BigEndian.AppendUint32(out, 1) // compatible version
	for len(b) > 0 {
		n := min(len(b), 1000)
		block := snappy.Encode(nil, b[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		b = b[n:]
	}
	return out
}

func lz4Compress(tb testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func zstdCompress(tb testing.TB, b []byte) []byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		tb.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

// franzRecords encodes recs with kmsg, the encoder franz-go's producer
// uses, keeping each record's OffsetDelta as given.
func franzRecords(recs []Record) []byte {
	var out []byte
	for _, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.TimestampDelta,
			OffsetDelta:      r.OffsetDelta,
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		// Length counts the bytes after itself: encode once with a
		// one-byte zero length to measure them.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		out = kr.AppendTo(out)
	}
	return out
}

// franzBatch wraps encoded records in a kmsg.RecordBatch compressed with c,
// with count records, LastOffsetDelta count-1 and a correct CRC.
func franzBatch(tb testing.TB, c codec, count int32, records []byte, attrs int16) []byte {
	payload := c.compress(tb, records)
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		Length:               int32(HeaderSize - LogOverhead + len(payload)),
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs | int16(c.attr),
		LastOffsetDelta:      count - 1,
		FirstTimestamp:       1_700_000_000_000,
		MaxTimestamp:         1_700_000_000_500,
		ProducerID:           7,
		ProducerEpoch:        1,
		FirstSequence:        100,
		NumRecords:           count,
		Records:              payload,
	}
	b := rb.AppendTo(nil)
	fixCRC(b)
	return b
}

// fixCRC recomputes the CRC of the batch b holds after a test edits it.
func fixCRC(b []byte) {
	size := LogOverhead + int(binary.BigEndian.Uint32(b[offBatchLength:]))
	binary.BigEndian.PutUint32(b[offCRC:], checksum(b, min(size, len(b))))
}

// sampleRecords covers the shapes a record can take: null and empty keys
// and values, headers with null and empty values, negative and large
// timestamp deltas, and values long enough to need multi-byte varints.
func sampleRecords() []Record {
	return []Record{
		{TimestampDelta: 0, Key: []byte("k0"), Value: []byte("v0")},
		{TimestampDelta: 5, Key: nil, Value: []byte("no key")},
		{TimestampDelta: -3, Key: []byte{}, Value: []byte{}},
		{TimestampDelta: 500, Key: []byte("tombstone"), Value: nil},
		{TimestampDelta: 1 << 40, Key: []byte("h"), Value: bytes.Repeat([]byte("x"), 300), Headers: []RecordHeader{
			{Key: "a", Value: []byte("1")},
			{Key: "", Value: nil},
			{Key: "empty", Value: []byte{}},
		}},
		{TimestampDelta: 7, Key: bytes.Repeat([]byte("K"), 20000), Value: bytes.Repeat([]byte("V"), 70000)},
	}
}

// withOffsetDeltas returns a copy of recs with OffsetDelta set to the index,
// as they decode from a batch.
func withOffsetDeltas(recs []Record) []Record {
	out := append([]Record(nil), recs...)
	for i := range out {
		out[i].OffsetDelta = int32(i)
	}
	return out
}
