package seglog

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// firstWins is a Retainer for a log whose reader keeps the first value of
// each key: it keeps the first record of each key below through, strips
// header "if" from what it keeps, and notes the through it was given.
type firstWins struct {
	l       *Log
	through int64
}

func (f *firstWins) retain(through int64) (func(int64, record.Record) (record.Record, bool), error) {
	f.through = through
	first := map[string]int64{}
	for _, r := range readRecords(f.l, through) {
		if _, ok := first[string(r.rec.Key)]; !ok {
			first[string(r.rec.Key)] = r.offset
		}
	}
	return func(off int64, r record.Record) (record.Record, bool) {
		if first[string(r.Key)] != off {
			return r, false
		}
		var hs []record.RecordHeader
		for _, h := range r.Headers {
			if h.Key != "if" {
				hs = append(hs, h)
			}
		}
		r.Headers = hs
		return r, true
	}, nil
}

type offsetRecord struct {
	offset int64
	rec    record.Record
}

// readRecords reads every record of l below end, with its headers.
func readRecords(l *Log, end int64) []offsetRecord {
	var out []offsetRecord
	for next := l.StartOffset(); next < end; {
		s, err := l.Read(next, everything)
		if err != nil {
			panic(err)
		}
		b, err := s.Bytes()
		s.Release()
		if err != nil || len(b) == 0 {
			return out
		}
		for len(b) > 0 {
			h, err := record.ParseHeader(b)
			if err != nil {
				panic(err)
			}
			recs, err := record.Records(b[:h.Size()])
			if err != nil {
				panic(err)
			}
			for _, r := range recs {
				if off := h.BaseOffset + int64(r.OffsetDelta); off >= next && off < end {
					out = append(out, offsetRecord{off, r})
				}
			}
			next = max(next, h.LastOffset()+1)
			b = b[h.Size():]
		}
	}
	return out
}

// TestCompactRetaining: a pass with a Retainer keeps what it says (here
// the first record of each key, not the newest), writes its rewrites
// (a header dropped), is told the offset it rewrites up to, and still
// drops the tombstones past delete.retention.ms; a lone segment whose
// records are only rewritten is swapped in too.
func TestCompactRetaining(t *testing.T) {
	l := mustOpen(t, t.TempDir(), compactConfig())
	defer l.Close()
	cond := []record.RecordHeader{{Key: "if", Value: []byte("x")}, {Key: "other", Value: []byte("y")}}
	var batches int
	for v := range 4 {
		for k := range 20 {
			recs := []record.Record{{Key: []byte(key(k)), Value: []byte("v" + string(rune('0'+v)))}}
			switch {
			case k == 0 && v == 0:
				recs[0].Headers = cond
			case k == 1 && v == 0:
				recs[0].Value = nil // a tombstone, kept as the first, until it expires
			}
			if _, err := l.Append(record.NewBatch(testTs0+int64(batches), recs), AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			batches++
		}
	}
	if n := len(segmentBases(l)); n < 3 {
		t.Fatalf("only %d segments", n)
	}
	f := &firstWins{l: l}
	st, err := l.CompactRetaining(context.Background(), time.UnixMilli(withinRetained), math.MaxInt64, f.retain)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Cleaned || st.RecordsRewritten != 1 || f.through != activeBase(l) {
		t.Fatalf("stats %+v, told through %d, active segment at %d", st, f.through, activeBase(l))
	}
	got := map[string]string{}
	for _, r := range readRecords(l, activeBase(l)) {
		if _, dup := got[string(r.rec.Key)]; dup {
			t.Fatalf("key %s kept twice", r.rec.Key)
		}
		got[string(r.rec.Key)] = string(r.rec.Value)
		if len(r.rec.Headers) > 1 || len(r.rec.Headers) == 1 && r.rec.Headers[0].Key != "other" {
			t.Fatalf("key %s kept with headers %v", r.rec.Key, r.rec.Headers)
		}
	}
	if v, ok := got[key(1)]; !ok || v != "" {
		t.Fatalf("the tombstone of %s within delete.retention.ms: %q, %v", key(1), v, ok)
	}
	for k := 2; k < 20; k++ {
		if v, ok := got[key(k)]; ok && v != "v0" {
			t.Fatalf("%s kept as %q, want its first value", key(k), v)
		}
	}

	// Past delete.retention.ms the tombstone goes, whatever the Retainer
	// (once enough is dirty for a pass).
	for k := range 60 {
		rec := record.Record{Key: []byte(key(20 + k)), Value: []byte("later")}
		if _, err := l.Append(record.NewBatch(testTs0+int64(batches), []record.Record{rec}), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	st, err = l.CompactRetaining(context.Background(), time.UnixMilli(farFuture), math.MaxInt64,
		func(int64) (func(int64, record.Record) (record.Record, bool), error) {
			return func(_ int64, r record.Record) (record.Record, bool) { return r, true }, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if st.TombstonesRemoved != 1 {
		t.Fatalf("stats %+v: want the tombstone removed", st)
	}
}

// TestCompactRetainingRewritesLoneSegment: a segment from which a
// Retainer removes nothing but rewrites a record is still swapped.
func TestCompactRetainingRewritesLoneSegment(t *testing.T) {
	l := mustOpen(t, t.TempDir(), compactConfig())
	defer l.Close()
	rec := record.Record{Key: []byte("k"), Value: []byte("v"), Headers: []record.RecordHeader{{Key: "if", Value: []byte("x")}}}
	if _, err := l.Append(record.NewBatch(testTs0, []record.Record{rec}), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	big := record.Record{Key: []byte("big"), Value: make([]byte, segmentBytes)} // rolls the segment
	if _, err := l.Append(record.NewBatch(testTs0, []record.Record{big}), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(segmentBases(l)); n != 2 {
		t.Fatalf("%d segments, want the record's and the active one", n)
	}
	f := &firstWins{l: l}
	st, err := l.CompactRetaining(context.Background(), time.UnixMilli(withinRetained), math.MaxInt64, f.retain)
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(l, activeBase(l))
	if !st.Cleaned || st.RecordsRewritten != 1 || len(recs) != 1 || len(recs[0].rec.Headers) != 0 {
		t.Fatalf("stats %+v, records %+v: want the record kept without its header", st, recs)
	}
}
