package e2e

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestFranzKeyedProduceConsume produces 1000 keyed records with acks=all to
// a 3-partition topic and reads them back with a direct consumer: every
// record exactly once, at the partition and offset the produce response
// gave, in per-partition order, and in the partition Kafka's key hash picks.
func TestFranzKeyedProduceConsume(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	const (
		topic      = "keyed"
		partitions = 3
		keys       = 100
		perKey     = 10
	)
	createTopic(t, adm, topic, partitions, nil)

	// Records go out in sequence order, so within each key (and so within
	// each partition) the sequence must come back increasing.
	var recs []*kgo.Record
	for seq := 0; seq < perKey; seq++ {
		for k := 0; k < keys; k++ {
			recs = append(recs, &kgo.Record{
				Topic: topic,
				Key:   fmt.Appendf(nil, "key-%03d", k),
				Value: fmt.Appendf(nil, "key-%03d/seq-%02d", k, seq),
			})
		}
	}
	producer := newFranz(t, n)
	produceSync(t, producer, recs...)

	type position struct {
		partition int32
		offset    int64
	}
	produced := make(map[string]position, len(recs))
	hasher := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	for _, r := range recs {
		produced[string(r.Value)] = position{r.Partition, r.Offset}
		if want := int32(hasher.Partition(r, partitions)); r.Partition != want {
			t.Errorf("record %q was produced to partition %d, Kafka's murmur2 key hash says %d", r.Value, r.Partition, want)
		}
	}

	got := consumeN(t, newConsumer(t, n, topic), len(recs))

	seen := make(map[string]bool, len(got))
	nextOffset := make(map[int32]int64) // per partition, offsets must be 0,1,2,...
	lastSeq := make(map[string]int)     // per key, sequences must increase
	keyPartition := make(map[string]int32)
	for _, r := range got {
		v := string(r.Value)
		if seen[v] {
			t.Errorf("record %q consumed twice (second time at %d/%d)", v, r.Partition, r.Offset)
			continue
		}
		seen[v] = true
		want, ok := produced[v]
		if !ok {
			t.Errorf("consumed record %q at %d/%d that was never produced", v, r.Partition, r.Offset)
			continue
		}
		if (position{r.Partition, r.Offset}) != want {
			t.Errorf("record %q consumed at partition %d offset %d, produce response said partition %d offset %d",
				v, r.Partition, r.Offset, want.partition, want.offset)
		}
		if r.Offset != nextOffset[r.Partition] {
			t.Errorf("partition %d: consumed offset %d (%q), want %d next: per-partition order or contiguity broken",
				r.Partition, r.Offset, v, nextOffset[r.Partition])
		}
		nextOffset[r.Partition] = r.Offset + 1
		key := string(r.Key)
		if p, ok := keyPartition[key]; ok && p != r.Partition {
			t.Errorf("key %q found in partitions %d and %d; a key must stay in one partition", key, p, r.Partition)
		}
		keyPartition[key] = r.Partition
		var seq int
		if _, err := fmt.Sscanf(v[strings.Index(v, "/")+1:], "seq-%d", &seq); err != nil {
			t.Fatalf("consumed value %q is not one this test wrote: %v", v, err)
		}
		if last, ok := lastSeq[key]; ok && seq <= last {
			t.Errorf("key %q: sequence %d consumed after %d; per-partition order not kept", key, seq, last)
		}
		lastSeq[key] = seq
	}
	if len(keyPartition) != keys {
		t.Errorf("consumed %d distinct keys, want %d", len(keyPartition), keys)
	}
	if len(nextOffset) != partitions {
		t.Errorf("records landed in %d partitions, want all %d (keys %d)", len(nextOffset), partitions, keys)
	}

	ends := endOffsets(t, adm, topic)
	for p := int32(0); p < partitions; p++ {
		if ends[p] != nextOffset[p] {
			t.Errorf("partition %d: ListEndOffsets says %d, consumed %d records", p, ends[p], nextOffset[p])
		}
	}
}

// TestFranzIdempotentProducerDefault produces with franz-go's defaults, which
// enable idempotent writes: the client sends InitProducerId first, and if
// the broker does not advertise that API it carries on without a producer
// id. Either way the records must arrive.
func TestFranzIdempotentProducerDefault(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	topic := "idempotent-default"
	createTopic(t, adm, topic, 1, nil)

	producer, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(producer.Close)
	var recs []*kgo.Record
	for i := range 50 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)})
	}
	produceSync(t, producer, recs...)

	got := consumeN(t, newConsumer(t, n, topic), len(recs))
	for i, r := range got {
		if want := fmt.Sprintf("v%d", i); string(r.Value) != want || r.Offset != int64(i) {
			t.Errorf("record %d: got %q at offset %d, want %q at offset %d", i, r.Value, r.Offset, want, i)
		}
	}
}

// TestFranzCompressionCodecs round-trips a batch through every codec and
// checks from the fetched batch attributes that the codec was really used
// (franz-go falls back to no compression when it does not shrink a batch,
// so the values are made compressible).
func TestFranzCompressionCodecs(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		attr  uint8 // the batch attributes' low 3 bits
	}{
		{"none", kgo.NoCompression(), 0},
		{"gzip", kgo.GzipCompression(), 1},
		{"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3},
		{"zstd", kgo.ZstdCompression(), 4},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			topic := "codec-" + c.name
			createTopic(t, adm, topic, 1, nil)
			producer := newFranz(t, n, kgo.ProducerBatchCompression(c.codec))
			var recs []*kgo.Record
			for i := range 200 {
				recs = append(recs, &kgo.Record{
					Topic: topic,
					Key:   fmt.Appendf(nil, "k%d", i),
					Value: bytes.Repeat(fmt.Appendf(nil, "%s-record-%04d ", c.name, i), 20),
				})
			}
			produceSync(t, producer, recs...)

			got := consumeN(t, newConsumer(t, n, topic), len(recs))
			for i, r := range got {
				if !bytes.Equal(r.Value, recs[i].Value) || !bytes.Equal(r.Key, recs[i].Key) {
					t.Fatalf("%s: record %d came back as key %q value %.40q..., want key %q value %.40q...",
						c.name, i, r.Key, r.Value, recs[i].Key, recs[i].Value)
				}
				if got := r.Attrs.CompressionType(); got != c.attr {
					t.Fatalf("%s: record %d was fetched from a batch with compression %d, want %d", c.name, i, got, c.attr)
				}
			}
		})
	}
}

// TestFranzHeadersAndTimestamps checks record headers (including repeated
// keys and empty values, in order) and client-set CreateTime timestamps
// survive the broker.
func TestFranzHeadersAndTimestamps(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	topic := "headers"
	createTopic(t, adm, topic, 1, nil)

	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{
			Topic:     topic,
			Value:     fmt.Appendf(nil, "v%d", i),
			Timestamp: base.Add(time.Duration(i) * time.Second),
			Headers: []kgo.RecordHeader{
				{Key: "trace", Value: fmt.Appendf(nil, "t-%d", i)},
				{Key: "dup", Value: []byte("first")},
				{Key: "dup", Value: []byte("second")},
				{Key: "empty", Value: []byte{}},
			},
		})
	}
	produceSync(t, newFranz(t, n), recs...)

	got := consumeN(t, newConsumer(t, n, topic), len(recs))
	for i, r := range got {
		want := recs[i]
		if !r.Timestamp.Equal(want.Timestamp) {
			t.Errorf("record %d: timestamp %v (%d ms), want %v (%d ms)", i, r.Timestamp, r.Timestamp.UnixMilli(), want.Timestamp, want.Timestamp.UnixMilli())
		}
		if tt := r.Attrs.TimestampType(); tt != 0 {
			t.Errorf("record %d: timestamp type %d, want 0 (CreateTime)", i, tt)
		}
		if len(r.Headers) != len(want.Headers) {
			t.Errorf("record %d: %d headers %v, want %d %v", i, len(r.Headers), r.Headers, len(want.Headers), want.Headers)
			continue
		}
		for j, h := range r.Headers {
			if h.Key != want.Headers[j].Key || !bytes.Equal(h.Value, want.Headers[j].Value) {
				t.Errorf("record %d header %d: %q=%q, want %q=%q", i, j, h.Key, h.Value, want.Headers[j].Key, want.Headers[j].Value)
			}
		}
	}
}

// TestFranzPinnedOlderVersions pins franz-go to the request versions of
// older Kafka releases, so the broker is exercised at lower (including
// non-flexible) versions of Metadata, CreateTopics, Produce, Fetch and
// ListOffsets. Record batches need Kafka 0.11+, so that is the floor.
func TestFranzPinnedOlderVersions(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	versions := []struct {
		name string
		v    *kversion.Versions
	}{
		{"0.11", kversion.V0_11_0()},
		{"1.1", kversion.V1_1_0()},
		{"2.1", kversion.V2_1_0()},
		{"2.4", kversion.V2_4_0()},
		{"2.8", kversion.V2_8_0()},
		{"3.6", kversion.V3_6_0()},
	}
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			topic := "pinned-" + strings.ReplaceAll(v.name, ".", "_")
			cl := newFranz(t, n,
				kgo.MaxVersions(v.v),
				kgo.AllowAutoTopicCreation(),
				kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			)
			var recs []*kgo.Record
			for i := range 30 {
				recs = append(recs, &kgo.Record{
					Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i),
					Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(v.name)}},
				})
			}
			produceSync(t, cl, recs...)
			got := consumeN(t, cl, len(recs))
			for i, r := range got {
				if !bytes.Equal(r.Value, recs[i].Value) || r.Offset != int64(i) {
					t.Errorf("Kafka %s versions: record %d is %q at offset %d, want %q at offset %d", v.name, i, r.Value, r.Offset, recs[i].Value, i)
				}
			}
		})
	}
}

// TestFranzAcksLevels produces with acks=0 and acks=1 (the other tests use
// acks=all): every record must still land, in order. acks=0 gets no
// response at all, so a broker that answered it anyway would desynchronise
// the client's correlation ids and fail the follow-up produce.
func TestFranzAcksLevels(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	for _, c := range []struct {
		name string
		acks kgo.Acks
	}{{"acks0", kgo.NoAck()}, {"acks1", kgo.LeaderAck()}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			topic := "acks-" + c.name
			createTopic(t, adm, topic, 1, nil)
			producer := newFranz(t, n, kgo.RequiredAcks(c.acks))
			var recs []*kgo.Record
			for i := range 100 {
				recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", c.name, i)})
			}
			// Two rounds on the same connection, so a stray response to
			// the first round would break the second.
			produceSync(t, producer, recs[:50]...)
			produceSync(t, producer, recs[50:]...)
			got := consumeN(t, newConsumer(t, n, topic), len(recs))
			for i, r := range got {
				if !bytes.Equal(r.Value, recs[i].Value) || r.Offset != int64(i) {
					t.Fatalf("%s: record %d is %q at offset %d, want %q at %d", c.name, i, r.Value, r.Offset, recs[i].Value, i)
				}
			}
		})
	}
}

// TestFranzFetchSmallerThanBatch consumes with fetch limits far below the
// size of one record batch: the broker must still return the first batch
// whole (KIP-74), or the consumer would never make progress.
func TestFranzFetchSmallerThanBatch(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	topic := "big-batches"
	createTopic(t, adm, topic, 1, nil)
	producer := newFranz(t, n, kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: bytes.Repeat(fmt.Appendf(nil, "%03d", i), 1500)}) // 4.5 KB each
	}
	produceSync(t, producer, recs...)

	consumer := newFranz(t, n,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(1024),
		kgo.FetchMaxPartitionBytes(1024),
	)
	got := consumeN(t, consumer, len(recs))
	for i, r := range got {
		if !bytes.Equal(r.Value, recs[i].Value) || r.Offset != int64(i) {
			t.Fatalf("record %d: %d bytes at offset %d, want the %d-byte record %d", i, len(r.Value), r.Offset, len(recs[i].Value), i)
		}
	}
}
