package seglog

import (
	"fmt"
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// producerHistory is what the test writes: producer 7's two batches, the
// second losing its last three records to later writes; producer 8's one
// batch, losing every record; and filler that closes their segments.
type producerHistory struct {
	last7, last8 int64 // base offsets of each producer's last batch
}

func writeProducerHistory(m *keyedLog) producerHistory {
	m.t.Helper()
	keys := func(prefix string, n int, version string) []kv {
		var kvs []kv
		for i := range n {
			kvs = append(kvs, put(fmt.Sprintf("%s%d", prefix, i), version))
		}
		return kvs
	}
	var h producerHistory
	first := keys("k", 5, "p7-first")
	m.appendBatch(producerBatch(testTs0, 7, 0, false, first...), first)
	last := keys("k", 5, "p7-last")
	h.last7 = m.appendBatch(producerBatch(testTs0, 7, 5, false, last...), last)
	only := keys("a", 2, "p8")
	h.last8 = m.appendBatch(producerBatch(testTs0, 8, 0, false, only...), only)
	m.append(testTs0, put("k2", "plain"), put("k3", "plain"), put("k4", "plain"))
	m.append(testTs0, put("a0", "plain"), put("a1", "plain"))
	for i := 0; len(segmentBases(m.l)) < 6; i++ {
		m.append(testTs0, put(key(i%5), "filler"))
	}
	return h
}

// lastBatchOf returns the header of producer id's last batch in l, and
// how many of its batches l holds.
func lastBatchOf(t *testing.T, l *Log, id int64) (last record.Header, batches int) {
	t.Helper()
	for b := wholeLog(t, l); len(b) > 0; {
		h, err := record.Verify(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.ProducerID == id {
			last, batches = h, batches+1
		}
		b = b[h.Size():]
	}
	return last, batches
}

// Kafka's cleaner keeps each idempotent producer's last batch, emptied if
// need be, because a replica rebuilds the producer's epoch and last
// sequence from the log. Here a last batch that loses its tail keeps an
// empty batch for it, ending at the producer's last sequence; one that
// loses everything stays as an empty batch with its original header; both
// survive a later pass; an earlier batch of a producer goes as any other.
func TestCompactKeepsEachProducersLastSequence(t *testing.T) {
	l := mustOpen(t, t.TempDir(), compactConfig())
	defer l.Close()
	m := newKeyedLog(t, l)
	h := writeProducerHistory(m)
	mustCompact(t, l, withinRetained)

	check := func(pass string) {
		t.Helper()
		last7, n7 := lastBatchOf(t, l, 7)
		switch {
		case n7 != 2: // the run of k0, k1 and the empty tail
			t.Fatalf("%s: producer 7 has %d batches, want 2", pass, n7)
		case last7.RecordCount != 0 || last7.BaseOffset != h.last7+2 || last7.LastOffset() != h.last7+4:
			t.Fatalf("%s: producer 7's last batch %+v, want an empty batch at [%d, %d]", pass, last7, h.last7+2, h.last7+4)
		case last7.BaseSequence != 7 || last7.BaseSequence+last7.LastOffsetDelta != 9:
			t.Fatalf("%s: producer 7's last batch has sequences %d.., want 7..9", pass, last7.BaseSequence)
		}
		last8, n8 := lastBatchOf(t, l, 8)
		if n8 != 1 || last8.RecordCount != 0 || last8.BaseOffset != h.last8 || last8.LastOffsetDelta != 1 || last8.BaseSequence != 0 {
			t.Fatalf("%s: producer 8 has %d batches, the last %+v: want its original header, emptied", pass, n8, last8)
		}
		sameState(t, replay(m.readKeyed(maxReadBytes)), m.live())
	}
	check("first pass")

	// New dirty data, another pass over the now clean segments.
	for activeBase(l) < l.EndOffset()-1 || len(segmentBases(l)) < 8 {
		m.append(testTs0+1, put(key(10), "later"))
	}
	if st := mustCompact(t, l, withinRetained); !st.Cleaned {
		t.Fatalf("second pass did not run: %+v", st)
	}
	check("second pass")
}

// A producer whose last batch is older than producer.id.expiration.ms is
// expired: nothing of it is kept beyond what the keys need.
func TestCompactForgetsExpiredProducers(t *testing.T) {
	cfg := compactConfig()
	cfg.ProducerIDExpirationMs = withinRetained - testTs0 - 1
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	m := newKeyedLog(t, l)
	writeProducerHistory(m)
	mustCompact(t, l, withinRetained)

	if last, n := lastBatchOf(t, l, 8); n != 0 {
		t.Fatalf("expired producer 8 still has %d batches, the last %+v", n, last)
	}
	if last, n := lastBatchOf(t, l, 7); n != 1 || last.RecordCount != 2 {
		t.Fatalf("expired producer 7 has %d batches, the last %+v: want only the run of its 2 live records", n, last)
	}
	sameState(t, replay(m.readKeyed(maxReadBytes)), m.live())
}
