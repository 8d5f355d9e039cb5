package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// seedBatches are valid batches in every codec plus a few broken ones, the
// starting points the fuzzer mutates.
func seedBatches(f *testing.F) [][]byte {
	recs := withOffsetDeltas(sampleRecords()[:5])
	seeds := [][]byte{NewBatch(0, nil), NewBatch(0, recs)}
	for _, c := range codecs {
		seeds = append(seeds, franzBatch(f, c, int32(len(recs)), franzRecords(recs), 0))
	}
	seeds = append(seeds, franzBatch(f, codecs[0], 1, franzRecordWithHeaderCount(2), controlBit))
	short := NewBatch(0, recs)
	seeds = append(seeds, short[:len(short)-3], short[:HeaderSize-1])
	return seeds
}

// FuzzValidate checks that Validate never panics, fails only with ErrShort,
// ErrCorrupt or ErrTooLarge, and that what it accepts also passes Verify and decodes
// with Records into a batch NewBatch can rebuild. Each input is also tried
// with its CRC made right, so that mutations reach the record decoder
// instead of stopping at the checksum.
func FuzzValidate(f *testing.F) {
	for _, s := range seedBatches(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkValidate(t, b)
		if h, err := ParseHeader(b); err == nil {
			c := bytes.Clone(b)
			binary.BigEndian.PutUint32(c[offCRC:], checksum(c, h.Size()))
			checkValidate(t, c)
		}
	})
}

// checkValidate asserts the properties FuzzValidate promises for one input.
func checkValidate(t *testing.T, b []byte) {
	const limit = 1 << 20 // a small decompression limit keeps the fuzzer fast
	limits := Limits{MaxSize: HeaderSize + limit}
	h, err := ValidateWithin(b, limits)
	if err != nil {
		if !errors.Is(err, ErrShort) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("error is neither ErrShort, ErrCorrupt nor ErrTooLarge: %v", err)
		}
		if _, rerr := records(b, limit); rerr == nil {
			t.Fatalf("Records accepted what Validate rejected (%v)", err)
		}
		return
	}
	if vh, err := Verify(b); err != nil || vh != h {
		t.Fatalf("accepted batch fails Verify: %v", err)
	}
	recs, err := records(b, limit)
	if err != nil {
		t.Fatalf("Records rejected what Validate accepted: %v", err)
	}
	if len(recs) != int(h.RecordCount) {
		t.Fatalf("%d records, header says %d", len(recs), h.RecordCount)
	}
	rebuilt, err := Records(NewBatch(h.BaseTimestamp, recs))
	if err != nil {
		t.Fatalf("batch rebuilt by NewBatch: %v", err)
	}
	if !reflect.DeepEqual(rebuilt, recs) {
		t.Fatalf("records changed through NewBatch\n got %+v\nwant %+v", rebuilt, recs)
	}
	// The broker's in-place rewrites keep an accepted batch valid.
	c := bytes.Clone(b)
	SetBaseOffset(c, 77)
	SetLogAppendTime(c, 88)
	if _, err := ValidateWithin(c, limits); err != nil {
		t.Fatalf("after rewrites: %v", err)
	}
}

// FuzzSplit checks that Split never panics, and that the batches it
// returns verify and tile the input exactly.
func FuzzSplit(f *testing.F) {
	seeds := seedBatches(f)
	f.Add([]byte{})
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add(append(bytes.Clone(seeds[1]), seeds[3]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		batches, err := Split(b)
		if err != nil {
			if !errors.Is(err, ErrShort) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error is neither ErrShort nor ErrCorrupt: %v", err)
			}
			return
		}
		var joined []byte
		for i, batch := range batches {
			h, err := Verify(batch)
			if err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
			if h.Size() != len(batch) {
				t.Fatalf("batch %d: %d bytes, Size %d", i, len(batch), h.Size())
			}
			joined = append(joined, batch...)
		}
		if !bytes.Equal(joined, b) {
			t.Fatal("batches do not tile the input")
		}
	})
}
