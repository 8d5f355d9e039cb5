package record

import (
	"bytes"
	"testing"
)

// benchRecords is 16 records of 1 KiB values: a 16 KiB batch, typical of
// what a producer sends per partition.
func benchRecords() []Record {
	recs := make([]Record, 16)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte("key-000"),
			Value: bytes.Repeat([]byte{byte('a' + i)}, 1024)}
	}
	return recs
}

func BenchmarkValidate(b *testing.B) {
	recs := benchRecords()
	for _, c := range codecs {
		b.Run(c.name, func(b *testing.B) {
			batch := franzBatch(b, c, int32(len(recs)), franzRecords(recs), 0)
			b.SetBytes(int64(len(franzRecords(recs))))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkNewBatch(b *testing.B) {
	recs := benchRecords()
	b.ReportAllocs()
	for b.Loop() {
		NewBatch(0, recs)
	}
}
