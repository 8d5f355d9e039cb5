package reliability

import (
	"bytes"
	"context"
	"hash/crc32"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/nodetest"
	"github.com/wharf-mq/wharf/internal/record"
)

// The decompression-bomb test's shape: the report that found the problem
// sent 48 partitions of 61 KB gzip each, twice at once.
const (
	bombPartitions  = 48
	bombRequests    = 2
	bombRecords     = 600
	bombValueBytes  = 100_000              // zeros: 60 MB of records per batch
	bombHeapAllowed = 512 << 20            // peak heap growth the node may show
	bombTimeout     = 60 * time.Second     // for both requests of a codec
	bombSample      = 2 * time.Millisecond // how often the heap is sampled
)

// TestDecompressionBombs sends, for gzip, lz4 and zstd, two concurrent
// Produce requests (raw kmsg, acks=all) of 48 partitions each, every
// partition one batch that is valid but whose 600 records of 100,000 zero
// bytes inflate to 60 MB from 61 KB (gzip), 235 KB (lz4) or 2 KB (zstd).
// Every partition must get MESSAGE_TOO_LARGE (the records decompress past
// max.message.bytes) and nothing may be appended; the node's heap, sampled
// every 2 ms, may not grow by more than 512 MiB at its peak (on main it
// inflated every batch whole at once: 3.5 GB for one request, out of memory
// with two). Afterwards a franz-go producer with gzip compression still
// writes to the same topic and a consumer reads its records back.
func TestDecompressionBombs(t *testing.T) {
	n := nodetest.Start(t, newNodeLog(t, slog.LevelWarn).option())
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()),
		kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*bombTimeout)
	defer cancel()
	const topic = "bombs"
	topicID := createBombTopic(ctx, t, cl, topic)

	for _, codec := range []record.Compression{record.Gzip, record.LZ4, record.Zstd} {
		batch := bombBatch(t, codec)
		req := bombRequest(topic, topicID, batch)
		watch := watchHeap()
		start := time.Now()
		resps := make([]*kmsg.ProduceResponse, bombRequests)
		errs := make([]error, bombRequests)
		var wg sync.WaitGroup
		for i := range bombRequests {
			wg.Go(func() {
				rctx, rcancel := context.WithTimeout(ctx, bombTimeout)
				defer rcancel()
				resps[i], errs[i] = req.RequestWith(rctx, cl)
			})
		}
		wg.Wait()
		took := time.Since(start)
		grown, allocated := watch.stop()
		t.Logf("%s: %d requests × %d partitions × %d-byte batch (%d MB of records each): answered in %v; heap peak +%d MiB, %d MiB allocated",
			codec, bombRequests, bombPartitions, len(batch), bombRecords*bombValueBytes/1_000_000, took.Round(time.Millisecond), grown>>20, allocated>>20)
		for i := range bombRequests {
			if errs[i] != nil {
				t.Fatalf("%s: request %d: %v", codec, i, errs[i])
			}
			checkAllTooLarge(t, codec, resps[i])
		}
		if grown > bombHeapAllowed {
			t.Errorf("%s: the node's heap grew by %d MiB at its peak, more than %d MiB", codec, grown>>20, bombHeapAllowed>>20)
		}
	}
	checkBombTopicServes(ctx, t, cl, n.KafkaAddr(), topic)
}

// createBombTopic creates the topic with bombPartitions partitions and the
// default max.message.bytes, and returns its ID.
func createBombTopic(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, bombPartitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	return resp.Topics[0].TopicID
}

// bombBatch is one record batch of bombRecords records with values of
// bombValueBytes zeros, compressed with codec as tightly as it goes.
func bombBatch(t *testing.T, codec record.Compression) []byte {
	t.Helper()
	var raw []byte
	value := make([]byte, bombValueBytes)
	for i := range bombRecords {
		r := kmsg.Record{OffsetDelta: int32(i), Value: value}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // the bytes after the length itself
		raw = r.AppendTo(raw)
	}
	var buf bytes.Buffer
	switch codec {
	case record.Gzip:
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		w.Write(raw)
		w.Close()
	case record.LZ4:
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case record.Zstd:
		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
		buf.Write(enc.EncodeAll(raw, nil))
		enc.Close()
	}
	rb := kmsg.RecordBatch{
		Length:          int32(record.HeaderSize - record.LogOverhead + buf.Len()),
		Magic:           2,
		Attributes:      int16(codec),
		LastOffsetDelta: bombRecords - 1,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      bombRecords,
		Records:         buf.Bytes(),
	}
	b := rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}

// bombRequest is an acks=all Produce request sending batch to every
// partition of topic (named for v12 and below, by ID for v13).
func bombRequest(topic string, topicID [16]byte, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, int32(bombTimeout/time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	for p := range int32(bombPartitions) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// checkAllTooLarge requires MESSAGE_TOO_LARGE, saying why, for every
// partition of resp.
func checkAllTooLarge(t *testing.T, codec record.Compression, resp *kmsg.ProduceResponse) {
	t.Helper()
	answered := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			answered++
			msg := ""
			if rp.ErrorMessage != nil {
				msg = *rp.ErrorMessage
			}
			if rp.ErrorCode != kerr.MessageTooLarge.Code || !strings.Contains(msg, "decompress to more than") {
				t.Errorf("%s: partition %d: %v (%q), want MESSAGE_TOO_LARGE for records decompressing past the limit",
					codec, rp.Partition, kerr.ErrorForCode(rp.ErrorCode), msg)
			}
		}
	}
	if answered != bombPartitions {
		t.Errorf("%s: %d partitions answered, want %d", codec, answered, bombPartitions)
	}
}

// checkBombTopicServes requires that no bomb was appended and that a
// franz-go producer (gzip-compressed batches of ordinary records) and
// consumer still work on the topic.
func checkBombTopicServes(ctx context.Context, t *testing.T, cl *kgo.Client, addr, topic string) {
	t.Helper()
	const records = 200
	var batch []*kgo.Record
	for i := range records {
		v := strings.Repeat("ordinary compressible text ", 40) + string(rune('a'+i%26))
		batch = append(batch, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
		t.Fatalf("produce after the bombs: %v", err)
	}
	for _, r := range batch {
		if r.Offset >= records {
			t.Fatalf("record at offset %d: the bombs left records behind", r.Offset)
		}
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	got := 0
	for got < records && ctx.Err() == nil {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() == nil {
			t.Fatalf("consume after the bombs: %v", err)
		}
		got += fs.NumRecords()
	}
	if got != records {
		t.Fatalf("consumed %d of %d records produced after the bombs", got, records)
	}
}

// heapWatch samples the heap's live objects until stopped and keeps the
// peak.
type heapWatch struct {
	base, baseAllocs uint64
	done             chan struct{}
	peak             chan uint64
}

var heapMetrics = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}

func readHeap() (objects, allocs uint64) {
	s := append([]metrics.Sample(nil), heapMetrics...)
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// watchHeap starts sampling, after a collection so that the base is what
// is live.
func watchHeap() *heapWatch {
	runtime.GC()
	w := &heapWatch{done: make(chan struct{}), peak: make(chan uint64, 1)}
	w.base, w.baseAllocs = readHeap()
	go func() {
		tick := time.NewTicker(bombSample)
		defer tick.Stop()
		peak := w.base
		for {
			objects, _ := readHeap()
			peak = max(peak, objects)
			select {
			case <-w.done:
				w.peak <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// stop ends the sampling and returns the peak growth over the base and
// the bytes allocated meanwhile.
func (w *heapWatch) stop() (grown, allocated uint64) {
	close(w.done)
	peak := <-w.peak
	_, allocs := readHeap()
	return peak - w.base, allocs - w.baseAllocs
}
