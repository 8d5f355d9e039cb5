package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The fault tests' checker. Every producer writes numbered streams, one
// per partition: the value "PRODUCER/PARTITION/SEQ", SEQ counting from 0.
// The ledger records, per stream, how far the producer got and which
// numbers were acknowledged (acks=all); verify then reads every partition
// from the start and counts, per partition:
//
//   - lost: acknowledged, then missing from the log;
//   - duplicated: a number present twice, from an idempotent producer
//     (a producer without idempotence may write a retried batch twice:
//     Kafka promises it at least once, so those are counted as resent and
//     only logged);
//   - unexpected: a record no producer wrote there (a value that does not
//     parse, names another partition, or a number never handed to the
//     client);
//   - reordered: a number, at its first occurrence, below one already
//     read from the same stream.
//
// All four must be 0.

// streamKey names one producer's stream into one partition.
type streamKey struct {
	producer  string
	partition int32
}

// stream is what the ledger knows of one stream.
type stream struct {
	idempotent bool
	probe      bool  // single requests of a test, not load: progress ignores it
	sent       int64 // numbers below sent were handed to the client
	acked      map[int64]bool
}

// ledger is the producers' side of the checker, shared by every producer
// of a test.
type ledger struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every acknowledgement
	streams map[streamKey]*stream
}

func newLedger() *ledger {
	return &ledger{changed: make(chan struct{}), streams: map[streamKey]*stream{}}
}

// open registers a producer's stream; next hands out its numbers.
func (l *ledger) open(producer string, partition int32, idempotent bool) streamKey {
	return l.add(producer, partition, &stream{idempotent: idempotent, acked: map[int64]bool{}})
}

// openProbe registers a stream of single requests a test sends itself:
// checked as the others, but not waited for by waitProgress.
func (l *ledger) openProbe(name string, partition int32) streamKey {
	return l.add(name, partition, &stream{idempotent: true, probe: true, acked: map[int64]bool{}})
}

func (l *ledger) add(producer string, partition int32, s *stream) streamKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := streamKey{producer, partition}
	l.streams[k] = s
	return k
}

// next returns the stream's next number and the value carrying it.
func (l *ledger) next(k streamKey) (int64, []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.streams[k]
	seq := s.sent
	s.sent++
	return seq, fmt.Appendf(nil, "%s/%d/%d", k.producer, k.partition, seq)
}

func (l *ledger) ack(k streamKey, seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.streams[k].acked[seq] = true
	close(l.changed)
	l.changed = make(chan struct{})
}

// acks is how many numbers each stream had acknowledged.
func (l *ledger) acks() map[streamKey]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := make(map[streamKey]int, len(l.streams))
	for k, s := range l.streams {
		n[k] = len(s.acked)
	}
	return n
}

// waitProgress waits until every stream, but probes and those of the
// producers named in skip, has n more acknowledgements than in since (a
// snapshot from acks).
func (l *ledger) waitProgress(ctx context.Context, t *testing.T, since map[streamKey]int, n int, what string, skip ...string) {
	t.Helper()
	for {
		l.mu.Lock()
		var behind []string
		for k, s := range l.streams {
			if !s.probe && !slices.Contains(skip, k.producer) && len(s.acked) < since[k]+n {
				behind = append(behind, fmt.Sprintf("%s/%d at %d", k.producer, k.partition, len(s.acked)-since[k]))
			}
		}
		changed := l.changed
		l.mu.Unlock()
		if len(behind) == 0 {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			slices.Sort(behind)
			t.Fatalf("%s: streams short of %d more acknowledgements: %s", what, n, strings.Join(behind, ", "))
		}
	}
}

// partitionCounts is the checker's verdict on one partition.
type partitionCounts struct {
	records, acked                           int
	lost, duplicated, unexpected, reordered  int
	resent                                   int // duplicates of a producer without idempotence
	firstLost, firstUnexpected, firstReorder string
}

func (c partitionCounts) bad() bool {
	return c.lost+c.duplicated+c.unexpected+c.reordered > 0
}

// verify reads partitions 0..partitions-1 of topic from the start to
// their end offsets and fails the test unless every partition has lost =
// duplicated = unexpected = reordered = 0. Every producer must be
// stopped. It returns the records read and acknowledged in all.
func (l *ledger) verify(ctx context.Context, t *testing.T, seeds []string, topic string, partitions int32) (records, acked int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	ends := endOffsets(ctx, t, seeds, topic, partitions)
	for p := range partitions {
		c := l.checkPartition(ctx, t, seeds, topic, p, ends[p])
		t.Logf("%s-%d: %d records, %d acknowledged: lost %d, duplicated %d, unexpected %d, reordered %d (resent without idempotence: %d)",
			topic, p, c.records, c.acked, c.lost, c.duplicated, c.unexpected, c.reordered, c.resent)
		if c.bad() {
			logEndOffsetsByNode(ctx, t, seeds, topic, p)
			t.Errorf("%s-%d: lost %d (first %s), duplicated %d, unexpected %d (first %q), reordered %d (first %s)",
				topic, p, c.lost, c.firstLost, c.duplicated, c.unexpected, c.firstUnexpected, c.reordered, c.firstReorder)
		}
		records += c.records
		acked += c.acked
	}
	return records, acked
}

// checkPartition reads one partition up to end and counts against the
// ledger (held locked).
func (l *ledger) checkPartition(ctx context.Context, t *testing.T, seeds []string, topic string, p int32, end int64) partitionCounts {
	t.Helper()
	var c partitionCounts
	seen := map[streamKey]map[int64]int{}
	highest := map[streamKey]int64{}
	readPartition(ctx, t, seeds, topic, p, end, func(r *kgo.Record) {
		value := r.Value
		c.records++
		k, seq, ok := parseValue(value)
		s := l.streams[k]
		if !ok || k.partition != p || s == nil || seq >= s.sent {
			c.unexpected++
			if c.firstUnexpected == "" {
				c.firstUnexpected = string(value)
			}
			return
		}
		if seen[k] == nil {
			seen[k], highest[k] = map[int64]int{}, -1
		}
		seen[k][seq]++
		switch {
		case seen[k][seq] > 1 && s.idempotent:
			c.duplicated++
		case seen[k][seq] > 1:
			c.resent++
		case seq < highest[k]:
			c.reordered++
			if c.firstReorder == "" {
				c.firstReorder = fmt.Sprintf("%s after %d", value, highest[k])
			}
		default:
			highest[k] = seq
		}
	})
	for k, s := range l.streams {
		if k.partition != p {
			continue
		}
		c.acked += len(s.acked)
		for seq := range s.acked {
			if seen[k][seq] == 0 {
				c.lost++
				if c.firstLost == "" {
					c.firstLost = fmt.Sprintf("%s/%d/%d", k.producer, p, seq)
				}
			}
		}
	}
	return c
}

// parseValue splits "PRODUCER/PARTITION/SEQ".
func parseValue(v []byte) (streamKey, int64, bool) {
	parts := strings.Split(string(v), "/")
	if len(parts) != 3 {
		return streamKey{}, 0, false
	}
	p, err1 := strconv.ParseInt(parts[1], 10, 32)
	seq, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || seq < 0 {
		return streamKey{}, 0, false
	}
	return streamKey{parts[0], int32(p)}, seq, true
}

// endOffsets asks for the end offset (high watermark) of every partition,
// retrying until the cluster answers for all of them.
func endOffsets(ctx context.Context, t *testing.T, seeds []string, topic string, partitions int32) []int64 {
	t.Helper()
	admin := newAdmin(t, seeds)
	for {
		offs, err := admin.ListEndOffsets(ctx, topic)
		ends := make([]int64, partitions)
		answered := int32(0)
		if err == nil {
			for p := range partitions {
				if o, ok := offs.Lookup(topic, p); ok && o.Err == nil {
					ends[p] = o.Offset
					answered++
				}
			}
		}
		if answered == partitions {
			return ends
		}
		if ctx.Err() != nil {
			t.Fatalf("end offsets of %s: %v (%d of %d partitions answered)", topic, err, answered, partitions)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readPartition consumes partition p of topic from offset 0 to end with a
// direct partition consumer and hands each record to each.
func readPartition(ctx context.Context, t *testing.T, seeds []string, topic string, p int32, end int64, each func(*kgo.Record)) {
	t.Helper()
	if end == 0 {
		return
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for next := int64(0); next < end; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s-%d: offset %d of %d: %v", topic, p, next, end, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, kerr.NotLeaderForPartition) {
				t.Logf("fetch %s-%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end {
				each(r)
			}
			next = r.Offset + 1
		})
	}
}

// logEndOffsetsByNode logs what each node answers, by itself, for the end
// offset of partition p: an acknowledged record missing from a read up to
// one node's answer may be below another's (two nodes saying they lead,
// in different epochs) rather than lost.
func logEndOffsetsByNode(ctx context.Context, t *testing.T, seeds []string, topic string, p int32) {
	t.Helper()
	for i, seed := range seeds {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		cl.Close()
		if err == nil {
			ans := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
			err = kerr.ErrorForCode(ans.ErrorCode)
			t.Logf("%s-%d as node %d answers alone: end offset %d, leader epoch %d, error %v", topic, p, i+1, ans.Offset, ans.LeaderEpoch, err)
			continue
		}
		t.Logf("%s-%d: node %d does not answer: %v", topic, p, i+1, err)
	}
}
