package reliability

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ackGate decides whether an acknowledgement counts: a powerCut counts
// those that arrive before its cut; openGate counts all.
type ackGate interface {
	Ack(record func()) bool
}

type openGate struct{}

func (openGate) Ack(record func()) bool { record(); return true }

// kafkaAck is one record whose acks=all produce returned success.
type kafkaAck struct {
	producer  int
	seq       int64
	partition int32
	offset    int64
	value     string
}

// kafkaLoad is franz-go producers writing acks=all to one topic until
// stopped, with their outcomes.
type kafkaLoad struct {
	gate    ackGate
	cancel  context.CancelFunc
	clients []*kgo.Client
	loops   sync.WaitGroup
	pending sync.WaitGroup

	// pad, if set before the first record, is appended to every value
	// after a "|" (the disk-full test fills a file system faster so).
	pad string
	// tag prefixes every value, so that several loads can share a topic.
	tag string

	mu       sync.Mutex
	acked    []kafkaAck // acknowledged through the gate
	produced []int64    // per producer: records handed to the client
	failures map[string]int
}

// kafkaValue is what producer p writes as its seq-th record.
func kafkaValue(producer int, seq int64) string { return fmt.Sprintf("p%d-s%d", producer, seq) }

// probeValue marks records a test writes outside any load (to see whether
// a produce works); checks skip them.
const probeValue = "probe"

// parseKafkaValue inverts kafkaValue, with the load's tag before it and
// padding after it.
func parseKafkaValue(v string) (tag string, producer int, seq int64, ok bool) {
	v, _, _ = strings.Cut(v, "|") // padding, see kafkaLoad.pad
	i := strings.LastIndex(v, "p")
	if i < 0 {
		return "", 0, 0, false
	}
	tag, v = v[:i], v[i:]
	p, s, found := strings.Cut(strings.TrimPrefix(v, "p"), "-s")
	if !found {
		return "", 0, 0, false
	}
	pn, err1 := strconv.Atoi(p)
	sn, err2 := strconv.ParseInt(s, 10, 64)
	return tag, pn, sn, err1 == nil && err2 == nil
}

// startKafkaLoad starts n producers (each its own client and goroutine) at
// up to rate records per second each (0: unlimited). extra options go to
// every client.
func startKafkaLoad(t *testing.T, addr, topic string, n, rate int, gate ackGate, extra ...kgo.Opt) *kafkaLoad {
	return startTaggedKafkaLoad(t, addr, topic, "", n, rate, 0, gate, extra...)
}

// startTaggedKafkaLoad is startKafkaLoad with values prefixed by tag (no
// "p" in it) and padded by pad bytes.
func startTaggedKafkaLoad(t *testing.T, addr, topic, tag string, n, rate, pad int, gate ackGate, extra ...kgo.Opt) *kafkaLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ld := &kafkaLoad{gate: gate, cancel: cancel, produced: make([]int64, n), failures: map[string]int{}, tag: tag}
	if pad > 0 {
		ld.pad = "|" + strings.Repeat("x", pad)
	}
	for p := range n {
		opts := append([]kgo.Opt{
			kgo.SeedBrokers(addr),
			kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(time.Millisecond),
		}, extra...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			cancel()
			ld.closeClients()
			t.Fatalf("producer client: %v", err)
		}
		ld.clients = append(ld.clients, cl)
		ld.loops.Add(1)
		go ld.produce(ctx, cl, p, rate)
	}
	return ld
}

// loadTick is how often a paced loop gets its next share.
const loadTick = 5 * time.Millisecond

func (ld *kafkaLoad) produce(ctx context.Context, cl *kgo.Client, producer, rate int) {
	defer ld.loops.Done()
	perTick := int64(1 << 30)
	var tick <-chan time.Time
	if rate > 0 {
		tk := time.NewTicker(loadTick)
		defer tk.Stop()
		tick = tk.C
		perTick = max(1, int64(rate)*int64(loadTick)/int64(time.Second))
	}
	for seq := int64(0); ctx.Err() == nil; {
		for end := seq + perTick; seq < end && ctx.Err() == nil; seq++ {
			ld.produceOne(ctx, cl, producer, seq)
		}
		if tick != nil {
			select {
			case <-ctx.Done():
			case <-tick:
			}
		}
	}
}

func (ld *kafkaLoad) produceOne(ctx context.Context, cl *kgo.Client, producer int, seq int64) {
	v := ld.tag + kafkaValue(producer, seq) + ld.pad
	ld.mu.Lock()
	ld.produced[producer] = seq + 1
	ld.mu.Unlock()
	ld.pending.Add(1)
	cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.FormatInt(seq%16, 10)), Value: []byte(v)}, func(r *kgo.Record, err error) {
		defer ld.pending.Done()
		if err != nil {
			ld.mu.Lock()
			ld.failures[err.Error()]++
			ld.mu.Unlock()
			return
		}
		a := kafkaAck{producer: producer, seq: seq, partition: r.Partition, offset: r.Offset, value: v}
		ld.gate.Ack(func() {
			ld.mu.Lock()
			ld.acked = append(ld.acked, a)
			ld.mu.Unlock()
		})
	})
}

// stop ends the producers and waits for every callback.
func (ld *kafkaLoad) stop() {
	ld.cancel()
	ld.loops.Wait()
	ld.closeClients()
	ld.pending.Wait()
}

func (ld *kafkaLoad) closeClients() {
	var wg sync.WaitGroup
	for _, cl := range ld.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl.Close()
		}()
	}
	wg.Wait()
}

// failureSummary lists the failed callbacks by error, for the log.
func (ld *kafkaLoad) failureSummary() string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	keys := make([]string, 0, len(ld.failures))
	for k := range ld.failures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%dx %q; ", ld.failures[k], k)
	}
	return b.String()
}

// newKafkaClient returns a client closed at the end of the test.
func newKafkaClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates topic with partitions and configs.
func createTopic(t *testing.T, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKafkaClient(t, addr))
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// readTopic reads every partition of topic from its start to the high
// watermark; partitions are value by offset. Partitions in skip are not read.
func readTopic(t *testing.T, addr, topic string, skip ...int32) map[int32]map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKafkaClient(t, addr))
	// An error for a skipped (offline) partition is expected; any other
	// shows up below as a partition with an error or without an offset.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil && len(skip) == 0 || len(ends) == 0 {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	out := map[int32]map[int64]string{}
	want := map[int32]int64{}
	assign := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		for _, s := range skip {
			if o.Partition == s {
				return
			}
		}
		if o.Err != nil {
			t.Fatalf("end offset of %s[%d]: %v", topic, o.Partition, o.Err)
		}
		out[o.Partition] = map[int64]string{}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			assign[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return out
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for len(want) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: %v; partitions not read to their end: %v", topic, ctx.Err(), want)
		}
		fetches.EachError(func(_ string, p int32, err error) {
			t.Fatalf("fetch %s[%d]: %v", topic, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			out[r.Partition][r.Offset] = string(r.Value)
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

// checkKafka compares what the loads (with distinct tags) had
// acknowledged with what the topic holds: lost (an acknowledged value
// missing from its offset), unexpected (a value no load produced),
// duplicated, and out-of-order (a producer's records not in seq order
// within a partition). Probe records are skipped.
func checkKafka(rep *reporter, logs map[int32]map[int64]string, loads ...*kafkaLoad) tally {
	var c tally
	byTag := map[string]*kafkaLoad{}
	ackedValue := map[string]bool{}
	for _, ld := range loads {
		byTag[ld.tag] = ld
		for _, a := range ld.acked {
			c.checked++
			ackedValue[a.value] = true
			got, ok := logs[a.partition][a.offset]
			if !ok || got != a.value {
				c.lost++
				rep.report("lost", "%q acknowledged at partition %d offset %d, found %q (present %v)", a.value, a.partition, a.offset, got, ok)
			}
		}
	}
	seen := map[string]bool{}
	for p, log := range logs {
		offsets := make([]int64, 0, len(log))
		for off := range log {
			offsets = append(offsets, off)
		}
		sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
		type stream struct {
			tag      string
			producer int
		}
		lastSeq := map[stream]int64{}
		for _, off := range offsets {
			v := log[off]
			if strings.HasPrefix(v, probeValue) {
				continue
			}
			tag, producer, seq, ok := parseKafkaValue(v)
			ld := byTag[tag]
			if !ok || ld == nil || producer >= len(ld.produced) || seq >= ld.produced[producer] {
				c.unexpected++
				rep.report("unexpected", "partition %d offset %d holds %q, never produced", p, off, v)
				continue
			}
			if seen[v] {
				c.duplicated++
				rep.report("duplicated", "%q again at partition %d offset %d", v, p, off)
				continue
			}
			seen[v] = true
			if !ackedValue[v] {
				c.survivors++
			}
			s := stream{tag, producer}
			if prev, ok := lastSeq[s]; ok && seq <= prev {
				c.outOfOrder++
				rep.report("out-of-order", "partition %d: producer %s%d seq %d at offset %d after seq %d", p, tag, producer, seq, off, prev)
			}
			lastSeq[s] = seq
		}
	}
	return c
}
