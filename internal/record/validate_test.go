package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFranzBatches validates batches built the way franz-go's producer
// builds them (kmsg.Record and kmsg.RecordBatch encoders), in every codec.
func TestFranzBatches(t *testing.T) {
	recs := withOffsetDeltas(sampleRecords())
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			b := franzBatch(t, c, int32(len(recs)), franzRecords(recs), 0)
			h, err := Validate(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.Compression() != c.attr || h.RecordCount != int32(len(recs)) {
				t.Fatalf("header %+v", h)
			}
			got, err := Records(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, recs) {
				t.Fatalf("records differ\n got %+v\nwant %+v", got, recs)
			}
		})
	}
}

func TestRecordsDoNotAliasBatch(t *testing.T) {
	b := NewBatch(0, []Record{{Key: []byte("key"), Value: []byte("value"), Headers: []RecordHeader{{Key: "h", Value: []byte("hv")}}}})
	recs, err := Records(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := HeaderSize; i < len(b); i++ {
		b[i] = 'z'
	}
	r := recs[0]
	if string(r.Key) != "key" || string(r.Value) != "value" || string(r.Headers[0].Value) != "hv" {
		t.Fatalf("records changed with the batch: %q %q %q", r.Key, r.Value, r.Headers[0].Value)
	}
}

func TestControlBatch(t *testing.T) {
	// A transaction marker: key version 0, type 1 (commit). Kafka writes
	// them; clients read them. LastOffsetDelta is not held to the count.
	marker := []Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}}
	b := franzBatch(t, codecs[0], 1, franzRecords(marker), controlBit|transactionalBit)
	binary.BigEndian.PutUint32(b[23:], 3)
	fixCRC(b)
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Control() || !h.Transactional() {
		t.Fatalf("attributes %#x", h.Attributes)
	}
}

func TestEmptyBatch(t *testing.T) {
	b := NewBatch(42, nil)
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.RecordCount != 0 || h.LastOffsetDelta != 0 || h.MaxTimestamp != 42 || len(b) != HeaderSize {
		t.Fatalf("header %+v, %d bytes", h, len(b))
	}
	if recs, err := Records(b); err != nil || len(recs) != 0 {
		t.Fatalf("Records: %v %v", recs, err)
	}
}

// TestValidateRejects covers batches whose header and CRC are fine but whose
// records are not what the header says.
func TestValidateRejects(t *testing.T) {
	recs := withOffsetDeltas(sampleRecords()[:4])
	good := franzRecords(recs)
	n := int32(len(recs))
	none, gzip := codecs[0], codecs[1]

	// setCount sets RecordCount and a matching LastOffsetDelta, so only the
	// decode can notice.
	setCount := func(b []byte, count int32) []byte {
		binary.BigEndian.PutUint32(b[57:], uint32(count))
		binary.BigEndian.PutUint32(b[23:], uint32(count-1))
		fixCRC(b)
		return b
	}
	withRecord := func(mod func(r *kmsg.Record)) []byte {
		var out []byte
		for i, r := range recs {
			kr := kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value, TimestampDelta64: r.TimestampDelta}
			kr.Length = int32(len(kr.AppendTo(nil)) - 1)
			if i == 1 {
				mod(&kr)
			}
			out = kr.AppendTo(out)
		}
		return out
	}

	tests := []struct {
		name  string
		batch func(t *testing.T) []byte
		msg   string
	}{
		{"count above records", func(t *testing.T) []byte {
			return setCount(franzBatch(t, none, n, good, 0), n+1)
		}, "record 4"},
		{"count below records", func(t *testing.T) []byte {
			return setCount(franzBatch(t, none, n, good, 0), n-1)
		}, "after the last record"},
		{"compressed count above records", func(t *testing.T) []byte {
			return setCount(franzBatch(t, gzip, n, good, 0), n+1)
		}, "record 4"},
		{"compressed count below records", func(t *testing.T) []byte {
			return setCount(franzBatch(t, gzip, n, good, 0), n-1)
		}, "after the last record"},
		{"huge count", func(t *testing.T) []byte {
			return setCount(franzBatch(t, none, n, good, 0), 1<<31-1)
		}, "record 4"},
		{"last offset delta off", func(t *testing.T) []byte {
			b := franzBatch(t, none, n, good, 0)
			binary.BigEndian.PutUint32(b[23:], uint32(n))
			fixCRC(b)
			return b
		}, "last offset delta"},
		{"offset deltas not 0..n-1", func(t *testing.T) []byte {
			return franzBatch(t, none, n, withRecord(func(r *kmsg.Record) { r.OffsetDelta = 5 }), 0)
		}, "record 1: offset delta 5"},
		{"record length too long", func(t *testing.T) []byte {
			return franzBatch(t, none, n, withRecord(func(r *kmsg.Record) { r.Length++ }), 0)
		}, "record 1"},
		{"record length too short", func(t *testing.T) []byte {
			return franzBatch(t, none, n, withRecord(func(r *kmsg.Record) { r.Length-- }), 0)
		}, "record 1"},
		{"record length negative", func(t *testing.T) []byte {
			return franzBatch(t, none, n, withRecord(func(r *kmsg.Record) { r.Length = -5 }), 0)
		}, "record 1: length -5"},
		{"null header key", func(t *testing.T) []byte {
			rec := []byte{0}                                 // attributes
			rec = binary.AppendVarint(rec, 0)                // timestamp delta
			rec = binary.AppendVarint(rec, 0)                // offset delta
			rec = binary.AppendVarint(rec, -1)               // null key
			rec = binary.AppendVarint(rec, -1)               // null value
			rec = binary.AppendVarint(rec, 1)                // one header
			rec = binary.AppendVarint(rec, -1)               // with a null key
			rec = binary.AppendVarint(rec, -1)               // and a null value
			raw := binary.AppendVarint(nil, int64(len(rec))) // length
			return franzBatch(t, none, 1, append(raw, rec...), 0)
		}, "header 0: bad key"},
		{"negative header count", func(t *testing.T) []byte {
			return franzBatch(t, none, 1, franzRecordWithHeaderCount(-1), 0)
		}, "bad header count"},
		{"key length below -1", func(t *testing.T) []byte {
			rec := []byte{0, 0, 0}
			rec = binary.AppendVarint(rec, -2)
			return franzBatch(t, none, 1, append(binary.AppendVarint(nil, int64(len(rec))), rec...), 0)
		}, "bad key"},
		{"varint beyond int32", func(t *testing.T) []byte {
			rec := binary.AppendVarint(nil, 1<<40)
			return franzBatch(t, none, 1, rec, 0)
		}, "bad length varint"},
		{"trailing bytes", func(t *testing.T) []byte {
			return franzBatch(t, none, n, append(bytes.Clone(good), 0), 0)
		}, "1 bytes after the last record"},
		{"unknown codec", func(t *testing.T) []byte {
			return franzBatch(t, codec{"c5", 5, none.compress}, n, good, 0)
		}, "unknown compression codec 5"},
		{"gzip garbage", func(t *testing.T) []byte {
			return franzBatch(t, codec{"bad", Gzip, none.compress}, n, good, 0)
		}, "gzip"},
		{"gzip trailing garbage", func(t *testing.T) []byte {
			return franzBatch(t, codec{"bad", Gzip, func(tb testing.TB, b []byte) []byte {
				return append(gzipCompress(tb, b), "junk"...)
			}}, n, good, 0)
		}, "gzip"},
		{"gzip truncated", func(t *testing.T) []byte {
			return franzBatch(t, codec{"bad", Gzip, func(tb testing.TB, b []byte) []byte {
				z := gzipCompress(tb, b)
				return z[:len(z)-5]
			}}, n, good, 0)
		}, "gzip"},
		{"snappy garbage", func(t *testing.T) []byte {
			return franzBatch(t, codec{"bad", Snappy, func(_ testing.TB, b []byte) []byte { return []byte{0xff, 0xff, 0xff} }}, n, good, 0)
		}, "snappy"},
		{"xerial block cut short", func(t *testing.T) []byte {
			return franzBatch(t, codec{"bad", Snappy, func(tb testing.TB, b []byte) []byte {
				x := xerialCompress(tb, b)
				return x[:len(x)-1]
			}}, n, good, 0)
		}, "snappy: xerial block"},
		{"lz4 garbage", func(t *testing.T) []byte {
			return franzBatch(t, codec{"bad", LZ4, none.compress}, n, good, 0)
		}, "lz4"},
		{"zstd garbage", func(t *testing.T) []byte {
			return franzBatch(t, codec{"bad", Zstd, none.compress}, n, good, 0)
		}, "zstd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.batch(t)
			if _, err := Verify(b); err != nil {
				t.Fatalf("test batch should pass Verify: %v", err)
			}
			_, err := Validate(b)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Validate: err %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not say %q", err, tt.msg)
			}
			if _, err := Records(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Records: err %v, want ErrCorrupt", err)
			}
		})
	}
}

func franzRecordWithHeaderCount(count int) []byte {
	rec := []byte{0}
	rec = binary.AppendVarint(rec, 0)
	rec = binary.AppendVarint(rec, 0)
	rec = binary.AppendVarint(rec, -1)
	rec = binary.AppendVarint(rec, -1)
	rec = binary.AppendVarint(rec, int64(count))
	return append(binary.AppendVarint(nil, int64(len(rec))), rec...)
}

// TestDecompressionBounded checks every codec stops at the limit, with a
// small limit so the test stays cheap.
func TestDecompressionBounded(t *testing.T) {
	recs := []Record{{Value: make([]byte, 64<<10)}}
	for _, c := range codecs[1:] {
		t.Run(c.name, func(t *testing.T) {
			b := franzBatch(t, c, 1, franzRecords(recs), 0)
			if _, err := ValidateWithin(b, Limits{MaxSize: HeaderSize + 128<<10}); err != nil {
				t.Fatalf("under the limit: %v", err)
			}
			_, err := ValidateWithin(b, Limits{MaxSize: HeaderSize + 16<<10})
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 16384 bytes") {
				t.Fatalf("over the limit: err %v", err)
			}
			if _, err := records(b, 16<<10); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Records over the limit: err %v", err)
			}
		})
	}
}

// TestZipBomb checks the real limit with codecs that inflate a few
// kilobytes into more than MaxDecompressedSize.
func TestZipBomb(t *testing.T) {
	t.Run("zstd", func(t *testing.T) {
		b := franzBatch(t, codecs[5], 1, zeroRecord(MaxDecompressedSize+1), 0)
		if len(b) > 64<<10 {
			t.Fatalf("bomb is %d bytes; the test wants a small one", len(b))
		}
		if _, err := Validate(b); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err %v, want ErrTooLarge", err)
		}
	})
	t.Run("snappy claims a huge block", func(t *testing.T) {
		// A raw snappy block states its decoded length first; claim 1 GiB.
		payload := binary.AppendUvarint(nil, 1<<30)
		payload = append(payload, snappy.Encode(nil, []byte("x"))[1:]...)
		b := franzBatch(t, codec{"bomb", Snappy, func(testing.TB, []byte) []byte { return payload }}, 1, nil, 0)
		_, err := Validate(b)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than") {
			t.Fatalf("err %v, want ErrTooLarge", err)
		}
	})
}

// zeroRecord is one record whose value is n zero bytes, encoded.
func zeroRecord(n int) []byte {
	return franzRecords([]Record{{Value: make([]byte, n)}})
}

func TestValidateUncompressedDoesNotAllocate(t *testing.T) {
	b := NewBatch(0, sampleRecords())
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Validate(b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Validate allocated %v times per run", allocs)
	}
}

// TestValidateConcurrent exercises the pooled decoders and scratch buffers
// from several goroutines at once (meaningful under -race).
func TestValidateConcurrent(t *testing.T) {
	recs := withOffsetDeltas(sampleRecords())
	var batches [][]byte
	for _, c := range codecs {
		batches = append(batches, franzBatch(t, c, int32(len(recs)), franzRecords(recs), 0))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 10 {
				for _, b := range batches {
					if _, err := Validate(b); err != nil {
						errs <- err
						return
					}
					if got, err := Records(b); err != nil || !reflect.DeepEqual(got, recs) {
						errs <- fmt.Errorf("Records: %v", err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
