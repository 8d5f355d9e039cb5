package queuestore

import (
	"slices"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// lowerCompactMin makes settlement logs compact from n bytes on, for one
// test.
func lowerCompactMin(t *testing.T, n int64) {
	old := compactMinBytes
	compactMinBytes = n
	t.Cleanup(func() { compactMinBytes = old })
}

func TestSettlementLogCompaction(t *testing.T) {
	lowerCompactMin(t, 16<<10)
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 8 << 10 })
	q := e.create("q")
	// One message stays unacked at the head, so the messages log cannot
	// move; everything after it is acked a few at a time, which grows the
	// settlement log until it is compacted.
	q.deliver(q.append("stuck"))
	const n = 5000
	for i := range n {
		off := q.append("m")
		q.deliver(off)
		q.settle(off)
		if i%5 == 4 {
			q.housekeep()
		}
	}
	if q.s.settled.StartOffset() == 0 {
		t.Error("settlement log never compacted")
	}
	if size := q.s.settled.Size(); size > 4*compactMinBytes {
		t.Errorf("settlement log %d bytes after %d settlements", size, n)
	}
	if q.s.Extent().Start != 0 {
		t.Error("messages log moved past an unsettled message")
	}
	e.restart()
	got := e.reopen("q").unsettled()
	if len(got) != 1 || got[0].body != "stuck" || !got[0].redelivered {
		t.Errorf("after restart: %+v, want the stuck message, redelivered", got)
	}
}

// A settled prefix that has not reached a segment boundary (so the messages
// log start could not move) must survive settlement-log compaction.
func TestCompactionKeepsSettledPrefix(t *testing.T) {
	lowerCompactMin(t, 8<<10)
	e := newEnv(t) // 16 MiB segments: everything stays in one
	q := e.create("q")
	for i := range 2000 {
		off := q.append("m")
		q.deliver(off)
		q.settle(off)
		if i%5 == 4 {
			q.housekeep()
		}
	}
	if q.s.Extent().Start != 0 {
		t.Fatal("messages log start moved; the test needs it not to")
	}
	if q.s.settled.StartOffset() == 0 {
		t.Fatal("settlement log never compacted")
	}
	q.append("last")
	e.crash()
	if got := e.reopen("q").bodies(); !slices.Equal(got, []string{"last"}) {
		t.Errorf("after compaction and a crash the queue holds %d messages, want only the last", len(got))
	}
}

// Delivery counts live in the settlement log; its compaction keeps those of
// unsettled messages.
func TestQuorumDeliveryCountsSurviveCompaction(t *testing.T) {
	lowerCompactMin(t, 16<<10)
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 8 << 10 })
	q := e.create("q")
	returned := q.append("returned")
	for n := range uint32(3) {
		q.deliver(returned)
		q.returned(returned, n+1)
	}
	q.deliver(returned) // held unacked, so the log cannot move past it
	for i := range 5000 {
		off := q.append("m")
		q.deliver(off)
		q.returned(off, 1) // counted, then settled
		q.deliver(off)
		q.settle(off)
		if i%5 == 4 {
			q.housekeep()
		}
	}
	if q.s.settled.StartOffset() == 0 {
		t.Fatal("settlement log never compacted")
	}
	if len(q.s.counts) != 1 {
		t.Fatalf("%d delivery counts kept, want 1 (settled messages' counts dropped)", len(q.s.counts))
	}
	e.restart()
	got := e.reopen("q").unsettled()
	if len(got) != 1 || got[0].body != "returned" || got[0].returns != 3 {
		t.Fatalf("after compaction and restart: %+v, want the returned message with 3 returns", got)
	}
}

// Settlement records that name offsets past the end of the messages log
// (its tail lost in a power cut after they were made durable) are dropped
// at recovery for good, so that the messages that get those offsets next
// survive the following restart.
func TestStaleSettlementsDroppedAtRecovery(t *testing.T) {
	e := newEnv(t)
	q := e.create("q")
	for _, b := range bodies("old", 10) {
		q.append(b)
	}
	q.sync()
	// What a power cut leaves when the settlement log was fsynced after
	// messages 10-14 were settled and the messages log before they were
	// written: settlements of offsets the log no longer has.
	s := q.s
	s.mu.Lock()
	settled, err := s.settledLog()
	if err == nil {
		stale := record.NewBatch(time.Now().UnixMilli(), []record.Record{
			{Key: settleRecordKey, Value: encodeRanges([][2]int64{{10, 15}})},
			{Key: countRecordKey, Value: encodeCounts(map[int64]uint32{12: 3})},
		})
		_, err = settled.Append(stale, replica.AppendOptions{})
	}
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	e.crash()
	q = e.reopen("q")
	if got := len(q.unsettled()); got != 10 {
		t.Fatalf("%d messages after the crash, want 10", got)
	}
	for _, b := range bodies("new", 5) {
		q.append(b)
		q.sync()
	}
	e.restart()
	e.reopen("q")
	e.restart()
	got := e.reopen("q").bodies()
	if want := append(bodies("old", 10), bodies("new", 5)...); !slices.Equal(got, want) {
		t.Fatalf("after two restarts the queue holds %v, want %v", got, want)
	}
}
