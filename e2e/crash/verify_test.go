package crash

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const readBackTimeout = 60 * time.Second

// partitionLog is what a partition held when read back: value by offset.
type partitionLog map[int64]string

// readTopic reads every partition of topic from its start offset up to the
// high watermark reported after the restart, with a direct (group-less)
// consumer.
func readTopic(t *testing.T, addr string, adm *kadm.Client, topic string) map[int32]partitionLog {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readBackTimeout)
	defer cancel()

	ends := listOffsets(t, ctx, adm.ListEndOffsets, topic)
	starts := listOffsets(t, ctx, adm.ListStartOffsets, topic)
	logs := make(map[int32]partitionLog, len(ends))
	assign := make(map[int32]kgo.Offset, len(ends))
	remaining := 0
	for p, end := range ends {
		logs[p] = make(partitionLog)
		if start := starts[p]; start != 0 {
			t.Errorf("topic %s partition %d starts at offset %d after restart, want 0", topic, p, start)
		}
		assign[p] = kgo.NewOffset().At(0)
		if end > 0 {
			remaining++
		}
	}
	if remaining == 0 {
		return logs
	}

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		t.Fatalf("consumer client: %v", err)
	}
	defer cl.Close()

	for remaining > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: %v; still short on %d partitions (high watermarks %v)", topic, ctx.Err(), remaining, ends)
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s[%d]: %v", topic, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			log := logs[r.Partition]
			if _, dup := log[r.Offset]; dup {
				t.Errorf("%s[%d] offset %d delivered twice by the consumer", topic, r.Partition, r.Offset)
			}
			log[r.Offset] = string(r.Value)
			if r.Offset+1 == ends[r.Partition] {
				remaining--
			}
		})
	}
	for p, log := range logs {
		if int64(len(log)) != ends[p] {
			t.Errorf("%s[%d]: read %d records below high watermark %d; offsets must be dense", topic, p, len(log), ends[p])
		}
	}
	return logs
}

// listOffsets turns one kadm offset listing of topic into offset by
// partition, failing the test on any error.
func listOffsets(t *testing.T, ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topic string) map[int32]int64 {
	t.Helper()
	listed, err := list(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	out := make(map[int32]int64)
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	if len(out) == 0 {
		t.Fatalf("list offsets of %s: no partitions", topic)
	}
	return out
}

// verdict counts what the read-back found.
type verdict struct {
	acked      int // acknowledged records checked
	lost       int // acknowledged but missing, or another value at its offset
	duplicated int // values present more than once
	outOfOrder int // acked records whose seq is not above the previous one of the same producer and partition
	unacked    int // records present that were never acknowledged (allowed: the ack was lost with the process)
	foreign    int // values that no producer of this test writes
}

func (v verdict) String() string {
	return fmt.Sprintf("acked records checked=%d lost=%d duplicated=%d out-of-order=%d (present but unacked=%d, foreign=%d)",
		v.acked, v.lost, v.duplicated, v.outOfOrder, v.unacked, v.foreign)
}

func (v verdict) ok() bool {
	return v.lost == 0 && v.duplicated == 0 && v.outOfOrder == 0 && v.foreign == 0
}

// add sums two verdicts.
func (v verdict) add(o verdict) verdict {
	return verdict{
		acked:      v.acked + o.acked,
		lost:       v.lost + o.lost,
		duplicated: v.duplicated + o.duplicated,
		outOfOrder: v.outOfOrder + o.outOfOrder,
		unacked:    v.unacked + o.unacked,
		foreign:    v.foreign + o.foreign,
	}
}

// maxReported bounds how many individual problems of each kind are logged.
const maxReported = 10

// judge compares what was acknowledged with what the partitions hold.
func judge(t *testing.T, topic string, acked []ackedRecord, logs map[int32]partitionLog) verdict {
	t.Helper()
	var v verdict
	reported := map[string]int{}
	report := func(kind, format string, args ...any) {
		if reported[kind]++; reported[kind] <= maxReported {
			t.Errorf("%s: %s: "+format, append([]any{topic, kind}, args...)...)
		}
	}

	// Lost: every ack must point at its own value.
	ackedValues := make(map[string]bool, len(acked))
	for _, a := range acked {
		v.acked++
		ackedValues[a.value] = true
		got, ok := logs[a.partition][a.offset]
		switch {
		case !ok:
			v.lost++
			report("lost", "%q acked at partition %d offset %d is missing", a.value, a.partition, a.offset)
		case got != a.value:
			v.lost++
			report("lost", "%q acked at partition %d offset %d, found %q there", a.value, a.partition, a.offset, got)
		}
	}

	// Duplicated and foreign: over everything the partitions hold.
	seen := make(map[string]bool)
	for p, log := range logs {
		for off, val := range log {
			if _, _, ok := parseRecordValue(val); !ok {
				v.foreign++
				report("foreign", "partition %d offset %d holds %q", p, off, val)
				continue
			}
			if seen[val] {
				v.duplicated++
				report("duplicated", "%q appears more than once (again at partition %d offset %d)", val, p, off)
				continue
			}
			seen[val] = true
			if !ackedValues[val] {
				v.unacked++
			}
		}
	}

	// Out of order: per producer and partition, seq rises with offset.
	type stream struct {
		producer  int
		partition int32
	}
	byStream := make(map[stream][]ackedRecord)
	for _, a := range acked {
		s := stream{a.producer, a.partition}
		byStream[s] = append(byStream[s], a)
	}
	for s, recs := range byStream {
		sort.Slice(recs, func(i, j int) bool { return recs[i].offset < recs[j].offset })
		for i := 1; i < len(recs); i++ {
			if recs[i].seq <= recs[i-1].seq {
				v.outOfOrder++
				report("out-of-order", "producer %d partition %d: seq %d at offset %d after seq %d at offset %d",
					s.producer, s.partition, recs[i].seq, recs[i].offset, recs[i-1].seq, recs[i-1].offset)
			}
		}
	}
	return v
}
