package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// idempotentBatch is a batch of n records from producer id/epoch starting
// at sequence seq, as an idempotent client would send it.
func idempotentBatch(id int64, epoch int16, seq int32, n int) []byte {
	return idempotentBatchAt(id, epoch, seq, n, time.Now(), 0)
}

// idempotentBatchAt is idempotentBatch with its records timestamped at
// and with the attribute bits attrs added (attrTransactional).
func idempotentBatchAt(id int64, epoch int16, seq int32, n int, at time.Time, attrs uint16) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte("v")}
	}
	b := record.NewBatch(at.UnixMilli(), recs)
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|attrs)
	binary.BigEndian.PutUint64(b[43:], uint64(id))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func produceOffset(t *testing.T, p *Partition, batch []byte) int64 {
	t.Helper()
	off, _, err := p.Produce(batch, -1)
	if err != nil {
		t.Fatalf("Produce: %v", err)
	}
	return off
}

func TestIdempotentProducer(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "idem"}, false)
	p, _ := tp.Partition(0)

	if off := produceOffset(t, p, idempotentBatch(7, 0, 0, 3)); off != 0 {
		t.Fatalf("first batch at %d", off)
	}
	if off := produceOffset(t, p, idempotentBatch(7, 0, 3, 2)); off != 3 {
		t.Fatalf("second batch at %d", off)
	}
	// A retry of the first batch (its response was lost) gets its offset back.
	if off := produceOffset(t, p, idempotentBatch(7, 0, 0, 3)); off != 0 {
		t.Errorf("retried batch answered with offset %d, want 0", off)
	}
	if p.EndOffset() != 5 {
		t.Errorf("retried batch was written again: end offset %d, want 5", p.EndOffset())
	}
	cases := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"gap", idempotentBatch(7, 0, 9, 1), ErrOutOfOrderSequence},
		{"new epoch not at 0", idempotentBatch(7, 1, 5, 1), ErrOutOfOrderSequence},
	}
	for _, c := range cases {
		if _, _, err := p.Produce(c.batch, -1); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if off := produceOffset(t, p, idempotentBatch(7, 1, 0, 1)); off != 5 {
		t.Errorf("new epoch's first batch at %d", off)
	}
	if _, _, err := p.Produce(idempotentBatch(7, 0, 5, 1), -1); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Errorf("old epoch after a bump: %v", err)
	}
}

func TestProducerStateSurvivesRestart(t *testing.T) {
	for _, clean := range []bool{true, false} {
		dir := t.TempDir()
		b := openTestBroker(t, dir)
		tp, _ := b.CreateTopic(TopicSpec{Name: "idem"}, false)
		p, _ := tp.Partition(0)
		produceOffset(t, p, idempotentBatch(3, 2, 0, 2))
		produceOffset(t, p, idempotentBatch(3, 2, 2, 2))
		b.Close()
		if !clean { // as after a crash: no snapshot, the log is replayed
			os.Remove(filepath.Join(dir, "idem-0", producerSnapshotFile))
		}

		b = openTestBroker(t, dir)
		tp, _ = b.Topic("idem")
		p, _ = tp.Partition(0)
		if off := produceOffset(t, p, idempotentBatch(3, 2, 2, 2)); off != 2 {
			t.Errorf("clean=%v: retry after restart answered %d, want 2", clean, off)
		}
		if off := produceOffset(t, p, idempotentBatch(3, 2, 4, 1)); off != 4 || p.EndOffset() != 5 {
			t.Errorf("clean=%v: next batch at %d, end %d", clean, off, p.EndOffset())
		}
		b.Close()
	}
}

func TestProducerExpiry(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "idem"}, false)
	p, _ := tp.Partition(0)
	produceOffset(t, p, idempotentBatch(3, 0, 0, 1))
	if err := p.maintainProducers(time.Now().Add(2 * defaultProducerIDExpirationMs * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if knownProducer(p, 3) {
		t.Fatal("producer 3 outlived its expiration")
	}
	// As in Kafka 2.5+, an expired producer goes on at its own sequence.
	produceOffset(t, p, idempotentBatch(3, 0, 1, 1))
	if _, _, err := p.Produce(idempotentBatch(3, 0, 5, 1), -1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Errorf("expired producer's gap after it came back: %v, want ErrOutOfOrderSequence", err)
	}
}

// TestUnknownProducerMidStream: a batch of a producer the partition holds
// no state for is taken at any sequence, as Kafka 2.5+ takes it
// (KIP-360), and the producer's next batches are checked from there.
func TestUnknownProducerMidStream(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "idem"}, false)
	p, _ := tp.Partition(0)
	if off := produceOffset(t, p, idempotentBatch(8, 0, 4, 2)); off != 0 {
		t.Fatalf("unknown producer mid-stream written at %d, want 0", off)
	}
	if off := produceOffset(t, p, idempotentBatch(8, 0, 4, 2)); off != 0 || p.EndOffset() != 2 {
		t.Errorf("its retry answered %d with end %d, want 0 and 2", off, p.EndOffset())
	}
	if _, _, err := p.Produce(idempotentBatch(8, 0, 9, 1), -1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Errorf("a gap after it: %v, want ErrOutOfOrderSequence", err)
	}
}

// TestRestartExpiresProducersByBatchTime: a producer is expired by its
// last batch's timestamp, which the log keeps, not by when a node last
// rebuilt its state: after a clean restart (from the snapshot) and after
// a crash (replaying the log), a producer whose last batch is two days
// old is unknown, one of now is known. On a LogAppendTime topic the time
// is the broker's stamp, not the producer's.
func TestRestartExpiresProducersByBatchTime(t *testing.T) {
	for _, c := range []struct {
		name    string
		configs map[string]string
		crash   bool
		oldGone bool
	}{
		{"clean restart", nil, false, true},
		{"crash", nil, true, true},
		{"LogAppendTime, crash", map[string]string{"message.timestamp.type": "LogAppendTime"}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b := openTestBroker(t, dir)
			tp, err := b.CreateTopic(TopicSpec{Name: "idem", Configs: c.configs}, false)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := tp.Partition(0)
			const old, recent = 5, 6
			twoDaysAgo := time.Now().Add(-2 * defaultProducerIDExpirationMs * time.Millisecond)
			produceOffset(t, p, idempotentBatchAt(old, 0, 0, 1, twoDaysAgo, 0))
			produceOffset(t, p, idempotentBatch(recent, 0, 0, 1))
			b.Close()
			if c.crash { // as after a crash: no snapshot, the log is replayed
				os.Remove(filepath.Join(dir, "idem-0", producerSnapshotFile))
			}

			b = openTestBroker(t, dir)
			defer b.Close()
			tp, _ = b.Topic("idem")
			p, _ = tp.Partition(0)
			if off := produceOffset(t, p, idempotentBatch(recent, 0, 0, 1)); off != 1 || p.EndOffset() != 2 {
				t.Errorf("retry of the producer of now: at %d, end %d; want its original 1, end 2", off, p.EndOffset())
			}
			if gone := !knownProducer(p, old); gone != c.oldGone {
				t.Errorf("producer whose last batch is 2 days old: forgotten=%v, want %v", gone, c.oldGone)
			}
		})
	}
}

// knownProducer reports whether p's producer table holds id.
func knownProducer(p *Partition, id int64) bool {
	p.produceMu.Lock()
	defer p.produceMu.Unlock()
	return p.producers.byID[id] != nil
}

// TestProducerStampedAheadExpiresADayAfter: a batch stamped in the future
// counts at its timestamp, as in Kafka: its producer outlives one of now
// and is expired a day after the stamp.
func TestProducerStampedAheadExpiresADayAfter(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "idem"}, false)
	p, _ := tp.Partition(0)
	const present, ahead = 1, 2
	stamp := time.Now().Add(36 * time.Hour)
	produceOffset(t, p, idempotentBatch(present, 0, 0, 1))
	produceOffset(t, p, idempotentBatchAt(ahead, 0, 0, 1, stamp, 0))
	day := defaultProducerIDExpirationMs * time.Millisecond
	for _, step := range []struct {
		at             time.Time
		present, ahead bool
	}{
		{time.Now().Add(36 * time.Hour), false, true},
		{stamp.Add(day - time.Minute), false, true},
		{stamp.Add(day + time.Minute), false, false},
	} {
		if err := p.maintainProducers(step.at); err != nil {
			t.Fatal(err)
		}
		if knownProducer(p, present) != step.present || knownProducer(p, ahead) != step.ahead {
			t.Errorf("at %v: producer of now known=%v, stamped ahead known=%v; want %v, %v",
				step.at, knownProducer(p, present), knownProducer(p, ahead), step.present, step.ahead)
		}
	}
}

func TestProducerIDsNeverRepeat(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	seen := map[int64]bool{}
	for i := 0; i < 3; i++ {
		id, err := b.AllocateProducerID()
		if err != nil || seen[id] {
			t.Fatalf("AllocateProducerID = %d, %v (seen %v)", id, err, seen)
		}
		seen[id] = true
	}
	b.Close()
	b = openTestBroker(t, dir)
	defer b.Close()
	for i := 0; i < producerIDsBlockSize+5; i++ {
		id, err := b.AllocateProducerID()
		if err != nil || seen[id] {
			t.Fatalf("after restart AllocateProducerID = %d, %v: repeated", id, err)
		}
		seen[id] = true
	}
}

// TestNewLeaderExpiresProducersByBatchTime: a follower that becomes a
// partition's leader rebuilds the producers from its log, each at its
// last batch's timestamp: one whose last batch is two days old is
// unknown there, as it is on the old leader, where taking the time of
// the rebuild gave it another day; one of now is kept.
func TestNewLeaderExpiresProducersByBatchTime(t *testing.T) {
	c := newTestCluster(t, 3)
	leader, _ := deadLeaderTopic(t, c)
	const old, recent = 5, 6
	twoDaysAgo := time.Now().Add(-2 * defaultProducerIDExpirationMs * time.Millisecond)
	produceToDeadLeader(c, idempotentBatchAt(old, 0, 0, 1, twoDaysAgo, 0))
	leader = produceToDeadLeader(c, idempotentBatch(recent, 0, 0, 1))
	next := isolateDeadLeader(c, leader)
	// Only a producer the new leader knows has its retry answered as a
	// duplicate.
	if off := produceOffset(t, next, idempotentBatch(recent, 0, 0, 1)); off != 1 || next.EndOffset() != 2 {
		t.Errorf("retry of the producer of now on the new leader: at %d, end %d; want its original 1, end 2", off, next.EndOffset())
	}
	if knownProducer(next, old) {
		t.Error("the new leader kept the producer whose last batch is 2 days old")
	}
	if _, _, err := next.Produce(idempotentBatch(recent, 0, 1, 1), 1); err != nil {
		t.Errorf("producer of now, on the new leader: %v", err)
	}
}

// deadPartition is node id's replica of partition 0 of deadLeaderTopic's
// topic.
func deadPartition(c *testCluster, id int32) *Partition {
	tp, _ := c.broker(id).Topic("dead")
	p, _ := tp.Partition(0)
	return p
}

// produceToDeadLeader produces batch (acks=all) to deadLeaderTopic's
// partition on the node that leads it now, which an election under load
// may have moved since, and returns that node; not on the nodes cut off.
func produceToDeadLeader(c *testCluster, batch []byte, cut ...int32) int32 {
	c.t.Helper()
	var leader int32
	c.waitFor("a produce to the partition's leader", func() bool {
		for _, id := range c.ids {
			if slices.Contains(cut, id) {
				continue
			}
			if _, _, err := deadPartition(c, id).Produce(batch, -1); err == nil {
				leader = id
				return true
			}
		}
		return false
	})
	return leader
}

// isolateDeadLeader cuts leader, the leader of deadLeaderTopic's
// partition, off and returns the partition on the node that leads it
// next.
func isolateDeadLeader(c *testCluster, leader int32) *Partition {
	c.t.Helper()
	c.isolate(leader, true)
	var next *Partition
	c.waitFor("a new leader of the partition", func() bool {
		for _, id := range c.ids {
			if p := deadPartition(c, id); id != leader && p.CheckLeader() == nil {
				next = p
				return true
			}
		}
		return false
	})
	return next
}
