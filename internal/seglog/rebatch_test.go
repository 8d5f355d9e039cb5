package seglog

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// sourceBatch is a log-append-time, transactional, idempotent batch of five
// records at offsets 100..104.
func sourceBatch(t *testing.T) (record.Header, []record.Record) {
	t.Helper()
	recs := make([]record.Record, 5)
	for i := range recs {
		recs[i] = record.Record{TimestampDelta: int64(i * 10), Key: []byte{byte('a' + i)}, Value: []byte{byte(i)},
			Headers: []record.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}}
	}
	b := record.NewBatch(5000, recs)
	be := binary.BigEndian
	record.SetBaseOffset(b, 100)
	record.SetPartitionLeaderEpoch(b, 7)
	be.PutUint16(b[batchOffAttributes:], attrTransactional)
	be.PutUint64(b[batchOffProducerID:], 42)
	be.PutUint16(b[batchOffProducerEpoch:], 3)
	be.PutUint32(b[batchOffBaseSequence:], math.MaxInt32-1)
	be.PutUint32(b[batchOffCRC:], 0)
	record.SetLogAppendTime(b, 9999) // also re-signs the batch
	h, err := record.Verify(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := record.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	return h, got
}

func TestRebuildRunKeepsHeaderFields(t *testing.T) {
	src, recs := sourceBatch(t)
	b := rebuildRun(src, 2, recs[2:4])
	h, err := record.Verify(b)
	if err != nil {
		t.Fatalf("rebuilt batch does not verify: %v", err)
	}
	got, err := record.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case h.BaseOffset != 102 || h.LastOffset() != 103 || len(got) != 2:
		t.Fatalf("offsets %d..%d, %d records", h.BaseOffset, h.LastOffset(), len(got))
	case h.PartitionLeaderEpoch != 7 || h.ProducerID != 42 || h.ProducerEpoch != 3:
		t.Fatalf("header %+v", h)
	case h.BaseSequence != 0: // MaxInt32-1 + 2 wraps to 0
		t.Fatalf("base sequence %d", h.BaseSequence)
	case !h.LogAppendTime() || !h.Transactional() || h.MaxTimestamp != 9999 || h.Compression() != record.None:
		t.Fatalf("attributes %#x, max timestamp %d", h.Attributes, h.MaxTimestamp)
	case h.BaseTimestamp+got[1].TimestampDelta != 5030:
		t.Fatalf("create timestamp of offset 103 is %d", h.BaseTimestamp+got[1].TimestampDelta)
	}
	for i, r := range got {
		want := recs[2+i]
		if string(r.Key) != string(want.Key) || string(r.Value) != string(want.Value) || len(r.Headers) != 1 || r.Headers[0].Value[0] != want.Headers[0].Value[0] {
			t.Fatalf("record %d is %+v, want %+v", i, r, want)
		}
	}
}

func TestEmptyTailCoversTheBatchEnd(t *testing.T) {
	src, _ := sourceBatch(t)
	for _, tc := range []struct {
		firstDelta int32
		base       int64
	}{{4, 104}, {1, 101}, {0, 100}} {
		b := emptyTail(src, tc.firstDelta)
		h, err := record.Verify(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset != tc.base || h.LastOffset() != 104 || h.RecordCount != 0 || h.MaxTimestamp != src.MaxTimestamp {
			t.Fatalf("empty tail from delta %d: header %+v", tc.firstDelta, h)
		}
		if h.ProducerID != src.ProducerID || h.ProducerEpoch != src.ProducerEpoch || h.BaseSequence != addSequence(src.BaseSequence, tc.firstDelta) {
			t.Fatalf("empty tail from delta %d: producer %d epoch %d base sequence %d", tc.firstDelta, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		if recs, err := record.Records(b); err != nil || len(recs) != 0 {
			t.Fatalf("Records: %d, %v", len(recs), err)
		}
	}
}

// gzipBatch builds a gzip-compressed batch of kvs with timestamp ts.
func gzipBatch(t *testing.T, ts int64, kvs ...kv) []byte {
	t.Helper()
	recs := make([]record.Record, len(kvs))
	for i, r := range kvs {
		recs[i] = record.Record{Key: r.key, Value: r.value}
	}
	plain := record.NewBatch(ts, recs)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(plain[record.HeaderSize:])
	zw.Close()
	b := append(append([]byte(nil), plain[:record.HeaderSize]...), z.Bytes()...)
	be := binary.BigEndian
	be.PutUint32(b[8:], uint32(len(b)-record.LogOverhead))
	be.PutUint16(b[batchOffAttributes:], uint16(record.Gzip))
	be.PutUint32(b[batchOffCRC:], crc32.Checksum(b[batchOffAttributes:], crc32c))
	if _, err := record.Validate(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCompactCompressedBatches(t *testing.T) {
	l := mustOpen(t, t.TempDir(), compactConfig())
	defer l.Close()
	m := newKeyedLog(t, l)
	appendRaw := func(b []byte, kvs ...kv) {
		res, err := l.Append(b, AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range kvs {
			m.byOffset[res.BaseOffset+int64(i)] = r
			m.latest[string(r.key)] = res.BaseOffset + int64(i)
		}
	}
	// One batch loses its middle record, one keeps all of them.
	loses := []kv{put("a", "1"), put("b", "1"), put("c", "1")}
	keeps := []kv{put("x", "1"), put("y", "1")}
	appendRaw(gzipBatch(t, testTs0, loses...), loses...)
	appendRaw(gzipBatch(t, testTs0, keeps...), keeps...)
	for i := 0; len(segmentBases(l)) < 3; i++ {
		m.append(testTs0, put("b", fmt.Sprint("later-", i)))
	}
	mustCompact(t, l, withinRetained)

	s, err := l.Read(0, everything)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Bytes()
	s.Release()
	var codecs []record.Compression
	var firsts []int64
	for len(b) > 0 && len(codecs) < 3 {
		h, err := record.Verify(b)
		if err != nil {
			t.Fatal(err)
		}
		codecs = append(codecs, h.Compression())
		firsts = append(firsts, h.BaseOffset)
		b = b[h.Size():]
	}
	// a (0) and c (2) as two uncompressed batches, then x,y still gzip.
	if fmt.Sprint(firsts) != "[0 2 3]" || fmt.Sprint(codecs) != "[none none gzip]" {
		t.Fatalf("batches at %v with codecs %v", firsts, codecs)
	}
	sameState(t, replay(m.readKeyed(everything)), m.live())
}
