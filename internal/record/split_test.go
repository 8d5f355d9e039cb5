package record

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	recs := withOffsetDeltas(sampleRecords())
	var parts [][]byte
	var all []byte
	for _, c := range codecs {
		b := franzBatch(t, c, int32(len(recs)), franzRecords(recs), 0)
		parts = append(parts, b)
		all = append(all, b...)
	}
	got, err := Split(all)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(parts) {
		t.Fatalf("%d batches, want %d", len(got), len(parts))
	}
	for i := range got {
		if !bytes.Equal(got[i], parts[i]) {
			t.Fatalf("batch %d differs", i)
		}
		if cap(got[i]) != len(got[i]) {
			t.Fatalf("batch %d: cap %d beyond its %d bytes", i, cap(got[i]), len(got[i]))
		}
	}

	if got, err := Split(nil); err != nil || len(got) != 0 {
		t.Fatalf("Split(nil) = %v, %v", got, err)
	}

	_, err = Split(all[:len(all)-1])
	if !errors.Is(err, ErrShort) || !strings.Contains(err.Error(), "batch at byte") {
		t.Fatalf("torn last batch: err %v, want ErrShort naming the batch", err)
	}

	bad := bytes.Clone(all)
	bad[len(parts[0])+HeaderSize] ^= 1 // second batch's first record byte
	_, err = Split(bad)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "batch at byte") {
		t.Fatalf("bad CRC in second batch: err %v", err)
	}
}
