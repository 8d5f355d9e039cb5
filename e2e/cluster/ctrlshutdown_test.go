package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestControlledShutdown: three nodes with a 2 s election timeout, an
// RF3 topic and an idempotent acks=all producer. The partition's leader
// is stopped with SIGTERM: it hands its leaderships over before it
// exits (its log says so), and the producer's longest stall around the
// stop stays under half the election timeout. The stopped node is
// started again, and the leader then is killed with SIGKILL for
// comparison: the producer stalls until the others notice and elect.
// Lost = duplicated = reordered = 0 across both. The two nodes left then
// stop one after the other, neither waiting out the hand-over's timeout.
func TestControlledShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	const electionTimeout, controlledShutdownTimeout = 2 * time.Second, 10 * time.Second
	nodes := prepareCluster(t, 3)
	for _, nd := range nodes {
		nd.extraArgs = []string{fmt.Sprint("--election-timeout=", electionTimeout),
			fmt.Sprint("--controlled-shutdown-timeout=", controlledShutdownTimeout)}
		nd.start()
	}
	for _, nd := range nodes {
		nd.waitReady()
	}
	logsOnFailure(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seeds := seedsOf(nodes)
	admin := newAdmin(t, seeds)
	const topic = "handed-over"
	createTopic(ctx, t, admin, topic)
	leader := waitLeader(ctx, t, admin, topic, -1)

	acks := &ackClock{}
	producer := newClient(t, seeds, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.WithHooks(acks))
	book := newBook()
	load := startLoad(ctx, producer, book)
	book.waitAcked(ctx, t, 300)

	stopped := nodes[leader-1]
	stopAt := time.Now()
	stopped.terminate()
	book.waitAcked(ctx, t, book.count()+300)
	graceful := acks.longestGap(stopAt)
	log, err := os.ReadFile(stopped.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(string(log), "controlled shutdown: every leadership handed over"); i < 0 {
		t.Errorf("node %d (the leader) stopped without handing its leaderships over", stopped.id)
	} else {
		t.Logf("node %d: %s", stopped.id, strings.SplitN(string(log[i:]), "\n", 2)[0])
	}
	newLeader := waitLeader(ctx, t, admin, topic, int32(stopped.id))
	t.Logf("SIGTERM of node %d (the leader): longest produce stall %v; node %d leads now",
		stopped.id, graceful.Round(time.Millisecond), newLeader)

	stopped.start()
	stopped.waitReady()
	waitISR(ctx, t, nodes[newLeader-1], topic, 3)
	killed := nodes[waitLeader(ctx, t, admin, topic, -1)-1]
	killAt := time.Now()
	killed.kill()
	book.waitAcked(ctx, t, book.count()+300)
	abrupt := acks.longestGap(killAt)
	t.Logf("SIGKILL of node %d (the leader): longest produce stall %v", killed.id, abrupt.Round(time.Millisecond))
	load.stop()

	if graceful >= electionTimeout/2 || graceful >= abrupt {
		t.Errorf("the producer stalled %v around a SIGTERM of the leader, %v around a SIGKILL; want the first under %v and below the second",
			graceful, abrupt, electionTimeout/2)
	}
	checkLog(ctx, t, seeds, topic, book)

	// The two left stop one after the other: the first hands over to
	// the last, which has no one left to hand to and stops at once.
	for _, nd := range nodes {
		if nd != killed {
			at := time.Now()
			nd.terminate()
			took := time.Since(at)
			t.Logf("node %d stopped %v after SIGTERM", nd.id, took.Round(time.Millisecond))
			if took > controlledShutdownTimeout/2 {
				t.Errorf("node %d took %v to stop after SIGTERM", nd.id, took)
			}
		}
	}
}

// ackClock is a kgo hook keeping when each record was acknowledged.
type ackClock struct {
	mu    sync.Mutex
	times []time.Time
}

func (c *ackClock) OnProduceRecordUnbuffered(_ *kgo.Record, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.times = append(c.times, time.Now())
}

// longestGap is the longest time without an acknowledgement from from
// to the last acknowledgement so far.
func (c *ackClock) longestGap(from time.Time) time.Duration {
	c.mu.Lock()
	times := slices.Clone(c.times)
	c.mu.Unlock()
	slices.SortFunc(times, time.Time.Compare)
	var longest time.Duration
	prev := from
	for _, at := range times {
		if at.After(prev) {
			longest = max(longest, at.Sub(prev))
			prev = at
		}
	}
	return longest
}

// TestFetchWakesOnCommit: a franz-go consumer of an RF3 partition waits
// in Fetch with MaxWait 5 s on the leader while an acks=all record is
// produced, and nothing after it. The record is readable once committed,
// after its append: the waiting fetch must be woken by the high
// watermark's move, not by the next append, and return it well before
// its MaxWait.
func TestFetchWakesOnCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	const maxWait = 5 * time.Second
	nodes := startCluster(t, 3)
	logsOnFailure(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seeds := seedsOf(nodes)
	admin := newAdmin(t, seeds)
	const topic = "woken"
	createTopic(ctx, t, admin, topic)
	waitLeader(ctx, t, admin, topic, -1)

	fetching := &fetchesInFlight{}
	consumer := newClient(t, seeds, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(maxWait), kgo.WithHooks(fetching))
	received := make(chan time.Time)
	var polling sync.WaitGroup
	defer polling.Wait()
	defer cancel() // before the Wait
	polling.Go(func() {
		for ctx.Err() == nil {
			consumer.PollFetches(ctx).EachRecord(func(*kgo.Record) {
				select {
				case received <- time.Now():
				case <-ctx.Done():
				}
			})
		}
	})
	producer := newClient(t, seeds, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	for i := range 3 {
		for !fetching.waiting() { // the consumer's fetch is on its way to the leader
			if ctx.Err() != nil {
				t.Fatal("the consumer sent no fetch")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := producer.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
		acked := time.Now()
		select {
		case at := <-received:
			t.Logf("record %d consumed %v after its acknowledgement", i, at.Sub(acked).Round(time.Millisecond))
			if at.Sub(acked) > maxWait/3 {
				t.Fatalf("record %d consumed %v after its acknowledgement: the fetch waiting on the leader (MaxWait %v) was not woken by the commit",
					i, at.Sub(acked).Round(time.Millisecond), maxWait)
			}
		case <-ctx.Done():
			t.Fatalf("record %d never consumed", i)
		}
	}
}

// fetchesInFlight is a kgo hook counting Fetch requests written and
// answered.
type fetchesInFlight struct {
	mu              sync.Mutex
	written, answer int
}

func (f *fetchesInFlight) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Fetch) && err == nil {
		f.mu.Lock()
		f.written++
		f.mu.Unlock()
	}
}

func (f *fetchesInFlight) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Fetch) {
		f.mu.Lock()
		f.answer++
		f.mu.Unlock()
	}
}

// waiting reports whether a Fetch was sent and not answered yet.
func (f *fetchesInFlight) waiting() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.written > f.answer
}
