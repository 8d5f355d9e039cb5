package record

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// manySmallRecords is n encoded records with 100-byte values of zeros:
// a batch that compresses to little and inflates to about 108*n bytes.
func manySmallRecords(n int) []byte {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), Key: []byte("k"), Value: make([]byte, 100)}
	}
	return franzRecords(recs)
}

// TestValidateStreamsCompressedRecords checks that validating a compressed
// batch does not hold its records decompressed: a batch inflating to
// 17 MB is validated with next to nothing allocated, in every codec that
// has a streaming decoder. (The bound allows 6 MiB: the lz4 decoder takes
// its 4 MiB block buffers from a sync.Pool, which the race detector
// empties at random. Holding the records would take 17 MB.)
func TestValidateStreamsCompressedRecords(t *testing.T) {
	const n = 160_000
	raw := manySmallRecords(n)
	for _, c := range []codec{codecs[1], codecs[4], codecs[5]} { // gzip, lz4, zstd
		t.Run(c.name, func(t *testing.T) {
			b := franzBatch(t, c, n, raw, 0)
			t.Logf("%d records, %d bytes compressed to %d", n, len(raw), len(b))
			validate := func() {
				if _, err := Validate(b); err != nil {
					t.Fatal(err)
				}
			}
			for range cap(inflaters) { // every inflater has made its decoders
				validate()
			}
			allocated := allocatedBy(validate)
			t.Logf("validating allocated %d bytes", allocated)
			if allocated > 6<<20 {
				t.Fatalf("validating %d bytes of records allocated %d bytes", len(raw), allocated)
			}
		})
	}
}

// allocatedBy is the bytes the process allocated while fn ran.
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestValidateWithinMaxSize checks Limits.MaxSize in every codec: a batch
// whose records decompress to exactly MaxSize-HeaderSize bytes passes, one
// byte less is ErrTooLarge.
func TestValidateWithinMaxSize(t *testing.T) {
	recs := withOffsetDeltas(sampleRecords())
	raw := franzRecords(recs)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			b := franzBatch(t, c, int32(len(recs)), raw, 0)
			if _, err := ValidateWithin(b, Limits{MaxSize: HeaderSize + len(raw)}); err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			_, err := ValidateWithin(b, Limits{MaxSize: HeaderSize + len(raw) - 1})
			if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("one byte over the limit: err %v, want ErrTooLarge", err)
			}
		})
	}
}

// TestValidateWithinKeyRequired checks Limits.KeyRequired in every codec.
func TestValidateWithinKeyRequired(t *testing.T) {
	keyed := withOffsetDeltas([]Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte{}, Value: nil}})
	keyless := withOffsetDeltas([]Record{{Key: []byte("a"), Value: []byte("1")}, {Key: nil, Value: []byte("2")}})
	required := Limits{KeyRequired: true}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ValidateWithin(franzBatch(t, c, 2, franzRecords(keyed), 0), required); err != nil {
				t.Fatalf("keyed records (one key empty): %v", err)
			}
			b := franzBatch(t, c, 2, franzRecords(keyless), 0)
			if _, err := ValidateWithin(b, required); !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "record 1") {
				t.Fatalf("a null key: err %v, want ErrNoKey at record 1", err)
			}
			if _, err := Validate(b); err != nil {
				t.Fatalf("a null key without KeyRequired: %v", err)
			}
		})
	}
}

// TestInflatersBoundConcurrency checks that a compressed batch waits for an
// idle inflater while an uncompressed one needs none.
func TestInflatersBoundConcurrency(t *testing.T) {
	recs := withOffsetDeltas(sampleRecords())
	plain := franzBatch(t, codecs[0], int32(len(recs)), franzRecords(recs), 0)
	gzipped := franzBatch(t, codecs[1], int32(len(recs)), franzRecords(recs), 0)

	var taken []*inflater
	for range cap(inflaters) {
		taken = append(taken, acquireInflater())
	}
	if _, err := Validate(plain); err != nil {
		t.Fatalf("uncompressed batch with every inflater taken: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Validate(gzipped)
		done <- err
	}()
	// Nothing can make the validation finish but a released inflater, so
	// this wait can only miss a broken bound, never fail a working one.
	select {
	case err := <-done:
		t.Fatalf("a compressed batch was validated while every inflater was taken (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	taken[0].release()
	if err := <-done; err != nil {
		t.Fatalf("after an inflater was released: %v", err)
	}
	for _, inf := range taken[1:] {
		inf.release()
	}
}
