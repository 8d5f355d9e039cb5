package crash

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// apiKeyInitProducerID is Kafka's API key for InitProducerId; an idempotent
// franz-go producer cannot start without it.
const apiKeyInitProducerID = 22

// ackedRecord is one record whose produce callback reported success.
type ackedRecord struct {
	producer  int
	seq       int64
	partition int32
	offset    int64
	value     string
}

// ledger collects the acknowledged records of one load run.
type ledger struct {
	mu      sync.Mutex
	acked   []ackedRecord
	failed  int            // callbacks with an error (expected once the broker is killed)
	errKind map[string]int // failed callbacks by error text, for the log
}

func (l *ledger) recordAck(producer int, seq int64, r *kgo.Record) {
	l.mu.Lock()
	l.acked = append(l.acked, ackedRecord{
		producer:  producer,
		seq:       seq,
		partition: r.Partition,
		offset:    r.Offset,
		value:     string(r.Value),
	})
	l.mu.Unlock()
}

func (l *ledger) recordFailure(err error) {
	l.mu.Lock()
	l.failed++
	if l.errKind == nil {
		l.errKind = make(map[string]int)
	}
	l.errKind[err.Error()]++
	l.mu.Unlock()
}

// recordValue is what producer p writes as its seq-th record.
func recordValue(producer int, seq int64) string {
	return fmt.Sprintf("producer-%d-seq-%d", producer, seq)
}

// parseRecordValue inverts recordValue.
func parseRecordValue(v string) (producer int, seq int64, ok bool) {
	rest, found := strings.CutPrefix(v, "producer-")
	if !found {
		return 0, 0, false
	}
	p, s, found := strings.Cut(rest, "-seq-")
	if !found {
		return 0, 0, false
	}
	pn, err1 := strconv.Atoi(p)
	sn, err2 := strconv.ParseInt(s, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return pn, sn, true
}

// recordKey spreads each producer's records over the partitions through the
// default key hashing, so every partition sees several producers.
func recordKey(seq int64) string { return "key-" + strconv.FormatInt(seq%16, 10) }

// load is a set of producers writing to one topic until stopped.
type load struct {
	ledger  *ledger
	cancel  context.CancelFunc
	clients []*kgo.Client
	loops   sync.WaitGroup // one per producer goroutine
	pending sync.WaitGroup // one per record handed to Produce, done in its callback
}

// startLoad starts n producers, each with its own franz-go client and
// goroutine, producing acks=all to topic at up to ratePerProducer records
// per second each (0: as fast as the broker takes them).
func startLoad(t *testing.T, addr, topic string, n int, idempotent bool, ratePerProducer int) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ld := &load{ledger: &ledger{}, cancel: cancel}
	for p := range n {
		opts := []kgo.Opt{
			kgo.SeedBrokers(addr),
			kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			// Small lingers make many small produce requests: more
			// places for the kill to land.
			kgo.ProducerLinger(time.Millisecond),
		}
		if !idempotent {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			cancel()
			ld.closeClients()
			t.Fatalf("producer client: %v", err)
		}
		ld.clients = append(ld.clients, cl)
		ld.loops.Add(1)
		go ld.produce(ctx, cl, p, ratePerProducer)
	}
	return ld
}

// pacingTick is how often a rate-limited producer hands the client its
// next share of records.
const pacingTick = time.Millisecond

// produce is producer p's loop: records with increasing seq until ctx ends,
// paced to rate records per second when rate > 0. Pacing keeps the record
// count, and so the read-back after each kill, bounded; the tiny records
// otherwise reach a million per second.
func (ld *load) produce(ctx context.Context, cl *kgo.Client, producer, rate int) {
	defer ld.loops.Done()
	var tick <-chan time.Time
	perTick := int64(math.MaxInt64)
	if rate > 0 {
		ticker := time.NewTicker(pacingTick)
		defer ticker.Stop()
		tick = ticker.C
		perTick = max(1, int64(rate)*int64(pacingTick)/int64(time.Second))
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

// produceOne hands record seq of producer to the client; its callback
// records the outcome in the ledger.
func (ld *load) produceOne(ctx context.Context, cl *kgo.Client, producer int, seq int64) {
	rec := &kgo.Record{
		Key:   []byte(recordKey(seq)),
		Value: []byte(recordValue(producer, seq)),
	}
	ld.pending.Add(1)
	cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
		defer ld.pending.Done()
		if err != nil {
			ld.ledger.recordFailure(err)
			return
		}
		ld.ledger.recordAck(producer, seq, r)
	})
}

// stop ends the producers: no new records, every client closed (which fails
// whatever was still buffered or in flight), every callback run. Call it
// after the broker is killed so nothing more can be acknowledged.
func (ld *load) stop() *ledger {
	ld.cancel()
	ld.loops.Wait()
	ld.closeClients()
	ld.pending.Wait()
	return ld.ledger
}

func (ld *load) closeClients() {
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

// newAdmin returns an admin client for the broker at addr, closed at the end
// of the test.
func newAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// supportsIdempotence reports whether the broker lists InitProducerId, which
// franz-go's default (idempotent) producer needs.
func supportsIdempotence(t *testing.T, adm *kadm.Client) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	versions, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	supported := len(versions) > 0
	versions.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil {
			t.Fatalf("ApiVersions from node %d: %v", v.NodeID, v.Err)
		}
		if _, ok := v.KeyMaxVersion(apiKeyInitProducerID); !ok {
			supported = false
		}
	})
	return supported
}

// createTopic creates topic with the given partitions and waits for nothing
// else: Wharf creates a topic's partitions before answering.
func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}
