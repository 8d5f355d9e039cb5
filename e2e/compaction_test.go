package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
)

// TestFranzCompactedTopic: many versions of keys and some tombstones go to a
// topic with cleanup.policy=compact and tiny segments; after a cleaner round
// a consumer from the start sees the newest value of every live key, offsets
// unchanged, and a consumer starting at a removed offset gets the next
// record. A record without key is refused with INVALID_RECORD.
func TestFranzCompactedTopic(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic = "compacted"
	createTopic(t, adm, topic, 1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"),
		"segment.bytes":  kadm.StringPtr("1024"),
	})
	cl := newFranz(t, n, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))

	const keys, versions = 20, 25
	latest := map[string]string{}
	var recs []*kgo.Record
	for v := 0; v < versions; v++ {
		for k := 0; k < keys; k++ {
			key, value := fmt.Sprintf("key-%02d", k), fmt.Sprintf("key-%02d@%d", k, v)
			r := &kgo.Record{Key: []byte(key), Value: []byte(value)}
			if k < 3 && v == versions-1 {
				r.Value = nil // the last version of keys 0..2 deletes them
				delete(latest, key)
			} else {
				latest[key] = value
			}
			recs = append(recs, r)
		}
		produceSync(t, cl, recs...) // one produce per version: many batches, many segments
		recs = recs[:0]
	}

	res := cl.ProduceSync(testContext(t), &kgo.Record{Value: []byte("no key")})
	if err := res.FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("produce without key to a compacted topic: %v, want INVALID_RECORD", err)
	}

	end := endOffsets(t, adm, topic)[0]
	if end != keys*versions {
		t.Fatalf("end offset %d, want %d", end, keys*versions)
	}
	if err := n.Broker().CompactNow(); err != nil {
		t.Fatalf("CompactNow: %v", err)
	}
	if got := endOffsets(t, adm, topic)[0]; got != end {
		t.Fatalf("end offset %d after compaction, was %d", got, end)
	}

	got := consumeTo(t, newConsumer(t, n, topic), end)
	if len(got) >= keys*versions/2 {
		t.Fatalf("consumed %d records after compaction, want far fewer than %d", len(got), keys*versions)
	}
	state := map[string]string{}
	for i, r := range got {
		if i > 0 && r.Offset <= got[i-1].Offset {
			t.Fatalf("offset %d after %d", r.Offset, got[i-1].Offset)
		}
		if r.Value == nil {
			delete(state, string(r.Key))
		} else {
			state[string(r.Key)] = string(r.Value)
		}
	}
	if len(state) != len(latest) {
		t.Fatalf("%d live keys after compaction, want %d: %v", len(state), len(latest), state)
	}
	for k, v := range latest {
		if state[k] != v {
			t.Fatalf("key %s = %q after compaction, want %q", k, state[k], v)
		}
	}

	// Other stock clients read the compacted log (gaps, rewritten and
	// empty batches) the same way.
	wantOffsets := make([]int64, len(got))
	for i, r := range got {
		wantOffsets[i] = r.Offset
	}
	sameOffsets(t, "sarama", saramaOffsets(t, n, topic, end), wantOffsets)
	sameOffsets(t, "kafka-go", kafkaGoOffsets(t, n, topic, end), wantOffsets)

	// Start inside a removed range: the first offsets of the log were all
	// superseded, so offset 1 now holds nothing.
	if got[0].Offset <= 1 {
		t.Fatalf("first record at offset %d: nothing was removed at the start", got[0].Offset)
	}
	inside := newFranz(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(1)}}))
	fromInside := consumeTo(t, inside, end)
	if len(fromInside) != len(got) || fromInside[0].Offset != got[0].Offset {
		t.Fatalf("from offset 1: %d records starting at %d, want %d starting at %d",
			len(fromInside), fromInside[0].Offset, len(got), got[0].Offset)
	}
}

// consumeTo polls cl until it has seen the record at offset end-1 of
// partition 0.
func consumeTo(t *testing.T, cl *kgo.Client, end int64) []*kgo.Record {
	t.Helper()
	ctx := testContext(t)
	var got []*kgo.Record
	for len(got) == 0 || got[len(got)-1].Offset < end-1 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records, not up to offset %d, before the deadline", len(got), end-1)
		}
		for _, fe := range fetches.Errors() {
			t.Fatalf("fetch error on %s[%d] after %d records: %v", fe.Topic, fe.Partition, len(got), fe.Err)
		}
		got = append(got, fetches.Records()...)
	}
	return got
}

func sameOffsets(t *testing.T, client string, got, want []int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s read %d records of the compacted log, franz-go %d", client, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: record %d at offset %d, franz-go saw %d", client, i, got[i], want[i])
		}
	}
}

// saramaOffsets reads partition 0 from the oldest offset up to end-1 with
// sarama and returns the offsets of the records it delivered.
func saramaOffsets(t *testing.T, n *node.Node, topic string, end int64) []int64 {
	t.Helper()
	consumer, err := sarama.NewConsumer([]string{n.KafkaAddr()}, saramaConfig(sarama.V2_8_0_0))
	if err != nil {
		t.Fatalf("sarama NewConsumer: %v", err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("sarama ConsumePartition: %v", err)
	}
	defer pc.Close()
	deadline := time.After(testTimeout)
	var offsets []int64
	for len(offsets) == 0 || offsets[len(offsets)-1] < end-1 {
		select {
		case m := <-pc.Messages():
			offsets = append(offsets, m.Offset)
		case err := <-pc.Errors():
			t.Fatalf("sarama after %d records: %v", len(offsets), err)
		case <-deadline:
			t.Fatalf("sarama read %d records, not up to offset %d, before the deadline", len(offsets), end-1)
		}
	}
	return offsets
}

// kafkaGoOffsets does the same with a kafka-go partition Reader.
func kafkaGoOffsets(t *testing.T, n *node.Node, topic string, end int64) []int64 {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   []string{n.KafkaAddr()},
		Topic:     topic,
		Partition: 0,
		MaxWait:   500 * time.Millisecond,
	})
	defer r.Close()
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		t.Fatalf("kafka-go SetOffset: %v", err)
	}
	ctx := testContext(t)
	var offsets []int64
	for len(offsets) == 0 || offsets[len(offsets)-1] < end-1 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go after %d records: %v", len(offsets), err)
		}
		offsets = append(offsets, m.Offset)
	}
	return offsets
}
