package record

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

func TestNewBatchRoundTrip(t *testing.T) {
	in := sampleRecords()
	for i := range in {
		in[i].OffsetDelta = 99 // ignored: NewBatch numbers records itself
	}
	b := NewBatch(1_700_000_000_000, in)
	if in[0].OffsetDelta != 99 {
		t.Fatal("NewBatch modified its input")
	}
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{
		BatchLength: int32(len(b) - LogOverhead), PartitionLeaderEpoch: -1, Magic: 2, CRC: h.CRC,
		LastOffsetDelta: int32(len(in) - 1), BaseTimestamp: 1_700_000_000_000,
		MaxTimestamp: 1_700_000_000_000 + 1<<40, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		RecordCount: int32(len(in)),
	}
	if h != want {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
	got, err := Records(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, withOffsetDeltas(in)) {
		t.Fatalf("records differ\n got %+v\nwant %+v", got, withOffsetDeltas(in))
	}
	// The same bytes kmsg would produce for these records.
	if !bytes.Equal(b[HeaderSize:], franzRecords(withOffsetDeltas(in))) {
		t.Fatal("record encoding differs from kmsg's")
	}
}

func TestNewBatchMaxTimestampAllNegative(t *testing.T) {
	b := NewBatch(1000, []Record{{TimestampDelta: -10}, {TimestampDelta: -5}, {TimestampDelta: -7}})
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.MaxTimestamp != 995 {
		t.Fatalf("MaxTimestamp %d, want 995", h.MaxTimestamp)
	}
}

func TestBuilder(t *testing.T) {
	var bld Builder
	recs := sampleRecords()
	for i, r := range recs {
		if bld.Len() != i {
			t.Fatalf("Len %d before record %d", bld.Len(), i)
		}
		bld.Append(r)
	}
	first := bld.Build(5)
	if len(first) != bld.Size() {
		t.Fatalf("Size %d, Build gave %d bytes", bld.Size(), len(first))
	}
	if !bytes.Equal(first, NewBatch(5, recs)) {
		t.Fatal("Builder and NewBatch disagree")
	}
	if again := bld.Build(5); !bytes.Equal(again, first) || &again[0] == &first[0] {
		t.Fatal("second Build should return an equal, separate batch")
	}
	bld.Reset()
	bld.Append(Record{TimestampDelta: -1, Value: []byte("after reset")})
	b := bld.Build(10)
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.RecordCount != 1 || h.MaxTimestamp != 9 {
		t.Fatalf("after Reset: %+v", h)
	}
}

func TestVarintSize(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, 1 << 20, -(1 << 20), 1<<63 - 1, -1 << 63} {
		var buf [16]byte
		if got, want := varintSize(v), len(binary.AppendVarint(buf[:0], v)); got != want {
			t.Fatalf("varintSize(%d) = %d, want %d", v, got, want)
		}
	}
}
