package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordBatchHeaderSize is the fixed part of a Kafka v2 record batch, which
// franz-go's batch metrics leave out.
const recordBatchHeaderSize = 61

// payload is n bytes of pseudo-random data (fixed seed), so nothing along the
// way can compress it.
func payload(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{'w', 'h', 'a', 'r', 'f'}).Read(b)
	return b
}

// produceStats describes what the producer actually sent, so the disk
// baseline can write the same chunks.
type produceStats struct {
	batches      int64 // record batches written
	batchBytes   int64 // their size on the wire, headers included
	requests     int64 // produce requests written
	requestBytes int64 // their size on the wire
	idempotent   bool  // the client got a producer ID (InitProducerId)
}

// inFlight says how many produce requests the client could have in
// flight, for the notes.
func (s produceStats) inFlight(setup producerSetup) string {
	switch {
	case setup.maxInFlight > 0:
		return fmt.Sprintf("not idempotent, up to %d requests in flight", setup.maxInFlight)
	case s.idempotent:
		return "idempotent (producer ID from InitProducerId), up to 5 requests in flight"
	default:
		return "no producer ID (the broker offers no InitProducerId), 1 request in flight"
	}
}

func (s produceStats) meanBatchBytes() int64 {
	if s.batches == 0 {
		return 0
	}
	return s.batchBytes / s.batches
}

func (s produceStats) meanRequestBytes() int64 {
	if s.requests == 0 {
		return 0
	}
	return s.requestBytes / s.requests
}

// produceHooks counts batches and produce requests through franz-go's hooks.
type produceHooks struct {
	batches, batchBytes, batchRecords, requests, requestBytes atomic.Int64
}

var (
	_ kgo.HookProduceBatchWritten = (*produceHooks)(nil)
	_ kgo.HookBrokerWrite         = (*produceHooks)(nil)
)

func (h *produceHooks) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	h.batches.Add(1)
	h.batchBytes.Add(int64(m.CompressedBytes + recordBatchHeaderSize))
	h.batchRecords.Add(int64(m.NumRecords))
}

func (h *produceHooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	const produceKey = 0
	if key == produceKey && err == nil {
		h.requests.Add(1)
		h.requestBytes.Add(int64(n))
	}
}

// hookLag bounds how long awaitBatches waits for late batch hooks.
const hookLag = 5 * time.Second

// awaitBatches waits until the batch hook has seen records records. franz-go
// calls that hook from a goroutine of its own after the records' promises,
// so a count read right after Flush can miss the last batches; there is
// nothing to wait on but the count itself, hence the polling.
func (h *produceHooks) awaitBatches(records int64) {
	deadline := time.Now().Add(hookLag)
	for h.batchRecords.Load() < records && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

func (h *produceHooks) reset() {
	h.batches.Store(0)
	h.batchBytes.Store(0)
	h.batchRecords.Store(0)
	h.requests.Store(0)
	h.requestBytes.Store(0)
}

func (h *produceHooks) snapshot() produceStats {
	return produceStats{
		batches:      h.batches.Load(),
		batchBytes:   h.batchBytes.Load(),
		requests:     h.requests.Load(),
		requestBytes: h.requestBytes.Load(),
	}
}

// firstError keeps the first error reported by any callback.
type firstError struct {
	once sync.Once
	err  error
}

func (f *firstError) set(err error) { f.once.Do(func() { f.err = err }) }

// producerSetup is one way of configuring the benchmark's producer.
type producerSetup struct {
	key         string    // its sub-benchmark name
	name        string    // what the table calls it
	opts        []kgo.Opt // on top of the options every producer gets
	maxInFlight int       // set by opts; 0 leaves franz-go to choose
}

var (
	// defaultProducer is franz-go with its defaults. It produces
	// idempotently, with up to 5 produce requests in flight per broker,
	// when the broker offers InitProducerId; otherwise it produces
	// without a producer ID and keeps one request in flight, waiting for
	// each response (so each fsync) before sending the next request.
	defaultProducer = producerSetup{key: "default", name: "franz-go defaults"}

	// pipelinedProducer turns idempotence off and allows five produce
	// requests in flight per broker (as the Java client's
	// max.in.flight.requests.per.connection=5, or sarama's default), so
	// the broker can read and append one request while an earlier one
	// waits for its fsync. The cost franz-go documents: without
	// idempotence, a retried request can land after a later one
	// (reordering) or twice (duplicates).
	pipelinedProducer = producerSetup{
		key:         "inflight5",
		name:        "franz-go, not idempotent, 5 requests in flight",
		opts:        []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5)},
		maxInFlight: 5,
	}

	producerSetups = []producerSetup{defaultProducer, pipelinedProducer}
)

// produce writes 1 KiB records to topic through one franz-go client
// configured by setup, otherwise with its defaults (acks=all, 10 ms linger,
// 1 MB batches, sticky partitioning) except compression, which is off so the
// bytes on disk are the bytes measured. It stops handing records to the
// client when lim says so and the run ends when every record is
// acknowledged. startClock, if not nil, is called when the measured part
// begins (a benchmark's ResetTimer).
func produce(addr, topic string, setup producerSetup, lim limit, startClock func()) (result, produceStats, error) {
	hooks := &produceHooks{}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.WithHooks(hooks),
	}, setup.opts...)...)
	if err != nil {
		return result{}, produceStats{}, err
	}
	defer cl.Close()
	ctx := context.Background()
	value := payload(recordSize)

	// One record first, so metadata and the producer ID are fetched
	// before the clock starts.
	first := &kgo.Record{Value: value}
	if err := cl.ProduceSync(ctx, first).FirstErr(); err != nil {
		return result{}, produceStats{}, fmt.Errorf("first record: %w", err)
	}
	hooks.awaitBatches(1)
	hooks.reset()

	var acked atomic.Int64
	var failed firstError
	callback := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.set(err)
			return
		}
		acked.Add(1)
	}
	if startClock != nil {
		startClock()
	}
	start := time.Now()
	for sent := int64(0); !lim.done(sent, start); sent++ {
		cl.Produce(ctx, &kgo.Record{Value: value}, callback)
	}
	if err := cl.Flush(ctx); err != nil {
		return result{}, produceStats{}, err
	}
	elapsed := time.Since(start)
	if failed.err != nil {
		return result{}, produceStats{}, fmt.Errorf("produce: %w", failed.err)
	}
	n := acked.Load()
	hooks.awaitBatches(n)
	stats := hooks.snapshot()
	stats.idempotent = first.ProducerID >= 0
	return result{bytes: n * recordSize, records: n, elapsed: elapsed}, stats, nil
}

// prefill writes at least total bytes of 1 KiB records to topic as fast as
// possible (acks=1, not idempotent: the fill is setup, not a measurement).
func prefill(addr, topic string, total int64) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := context.Background()
	value := payload(recordSize)
	var failed firstError
	for sent := int64(0); sent < total; sent += recordSize {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.set(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return failed.err
}

// consumerSetup is one way of reading the fetch topics.
type consumerSetup struct {
	key  string // its sub-benchmark name
	name string
	// raw selects the minimal client of rawfetch.go instead of franz-go.
	raw bool
	// partitionMaxBytes and maxBytes are the fetch size limits; 0 keeps
	// franz-go's defaults (1 MiB per partition, 50 MiB per request).
	partitionMaxBytes, maxBytes int32
}

// franz-go's fetch size defaults, used by the raw client to ask for the
// same amounts.
const (
	defaultFetchPartitionMaxBytes = 1 << 20
	defaultFetchMaxBytes          = 50 << 20
	// tunedFetchPartitionMaxBytes is a larger per-partition limit, so a
	// consumer of few partitions makes fewer, larger round trips.
	tunedFetchPartitionMaxBytes = 8 << 20
)

var consumerSetups = []consumerSetup{
	{key: "franz-go", name: "franz-go defaults (1 MiB per partition)"},
	{key: "franz-go-8MiB", name: "franz-go, 8 MiB per partition", partitionMaxBytes: tunedFetchPartitionMaxBytes},
	{key: "raw", name: "minimal kmsg client, no decoding (1 MiB per partition)", raw: true},
	{key: "raw-8MiB", name: "minimal kmsg client, no decoding (8 MiB per partition)", raw: true, partitionMaxBytes: tunedFetchPartitionMaxBytes},
}

// readTopic reads topic as setup says until lim says stop.
func readTopic(addr, topic string, ends map[int32]int64, setup consumerSetup, lim limit) (result, error) {
	if setup.raw {
		return rawFetch(addr, topic, ends,
			cmp.Or(setup.partitionMaxBytes, defaultFetchPartitionMaxBytes),
			cmp.Or(setup.maxBytes, defaultFetchMaxBytes), lim)
	}
	var opts []kgo.Opt
	if setup.partitionMaxBytes > 0 {
		opts = append(opts, kgo.FetchMaxPartitionBytes(setup.partitionMaxBytes))
	}
	if setup.maxBytes > 0 {
		opts = append(opts, kgo.FetchMaxBytes(setup.maxBytes))
	}
	return fetch(addr, topic, ends, opts, lim)
}

// fetch reads topic with direct (group-less) franz-go consumers, with their
// defaults plus opts: from offset 0 to the end offsets in ends, then again
// from 0 with a new consumer, until lim says stop. Only record values count
// as bytes.
func fetch(addr, topic string, ends map[int32]int64, opts []kgo.Opt, lim limit) (result, error) {
	var total result
	start := time.Now()
	for !lim.done(total.records, start) {
		n, bytes, err := fetchPass(addr, topic, ends, opts, lim, start, total.records)
		total.records += n
		total.bytes += bytes
		if err != nil {
			return result{}, err
		}
	}
	total.elapsed = time.Since(start)
	return total, nil
}

// fetchPass is one read of the topic from the start, cut short when lim is
// reached (counting the records earlier passes read).
func fetchPass(addr, topic string, ends map[int32]int64, opts []kgo.Opt, lim limit, start time.Time, before int64) (records, bytes int64, err error) {
	assign := make(map[int32]kgo.Offset)
	for p, end := range ends {
		if end > 0 {
			assign[p] = kgo.NewOffset().At(0)
		}
	}
	if len(assign) == 0 {
		return 0, 0, errors.New("fetch: topic is empty")
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
	}, opts...)...)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	remaining := len(assign)
	for remaining > 0 && !lim.done(before+records, start) {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return records, bytes, fmt.Errorf("fetch %s: %w", topic, err)
		}
		var fetchErr error
		fetches.EachError(func(t string, p int32, err error) {
			fetchErr = errors.Join(fetchErr, fmt.Errorf("fetch %s[%d]: %w", t, p, err))
		})
		if fetchErr != nil {
			return records, bytes, fetchErr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			records++
			bytes += int64(len(r.Value))
			if r.Offset+1 == ends[r.Partition] {
				remaining--
			}
		})
	}
	return records, bytes, nil
}
