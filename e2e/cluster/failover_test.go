package cluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLeaderKillLosesNothing: three `wharf serve` processes, an RF3 topic,
// an idempotent acks=all producer writing a numbered sequence while the
// test kills the partition's leader with SIGKILL, then restarts it. A
// consumer then reads the partition from the start: every acknowledged
// number must be there (lost = 0), none twice (duplicated = 0), in
// increasing order (reordered = 0). The time from the kill to the first
// acknowledgement after it is the failover time.
func TestLeaderKillLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startCluster(t, 3)
	logsOnFailure(t, nodes)
	seeds := make([]string, len(nodes))
	for i, nd := range nodes {
		seeds[i] = nd.kafkaAddr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const topic = "replicated"
	admin := newAdmin(t, seeds)
	createTopic(ctx, t, admin, topic)
	if _, err := admin.CreateTopic(ctx, 1, 4, nil, "four-replicas"); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("a topic of 4 replicas on 3 nodes: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	leader := waitLeader(ctx, t, admin, topic, -1)
	t.Logf("partition leader: node %d", leader)

	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		// franz-go refreshes metadata at most every 5 s by default; Kafka's
		// Java producer every 100 ms (retry.backoff.ms).
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	book := newBook()
	load := startLoad(ctx, producer, book)

	book.waitAcked(ctx, t, 300)
	killed := nodes[leader-1]
	killAt := time.Now()
	killed.kill()
	book.markKill(killAt)
	t.Logf("killed node %d (the leader) after %d acknowledgements", killed.id, book.count())
	firstAfter := book.waitFirstAfterKill(ctx, t)
	t.Logf("failover: first acknowledgement %v after the leader was killed", firstAfter.Sub(killAt).Round(time.Millisecond))
	newLeader := waitLeader(ctx, t, admin, topic, int32(killed.id))
	t.Logf("new leader: node %d", newLeader)

	killed.start()
	killed.waitReady()
	book.waitAcked(ctx, t, book.count()+300)
	load.stop()

	checkLog(ctx, t, seeds, topic, book)
	checkStatus(ctx, t, killed, nodes)
}

// checkStatus runs `wharf cluster status` against nd until it shows every
// node of nodes and no partition under-replicated (the restarted node
// caught up).
func checkStatus(ctx context.Context, t *testing.T, nd *node, nodes []*node) {
	t.Helper()
	for {
		out, err := exec.CommandContext(ctx, nd.bin, "cluster", "status", "--bootstrap-server", nd.kafkaAddr).CombinedOutput()
		text := string(out)
		listed := !slices.ContainsFunc(nodes, func(n *node) bool { return !strings.Contains(text, n.kafkaAddr) })
		if err == nil && listed && strings.Contains(text, "controller") &&
			strings.Contains(text, "0 under-replicated, 0 without a leader") && strings.Contains(text, "replicated  ") {
			t.Logf("wharf cluster status:\n%s", text)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("wharf cluster status never showed a healthy cluster: %v\n%s", err, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func newAdmin(t *testing.T, seeds []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createTopic creates topic with one partition and three replicas,
// retrying while the cluster elects its controller.
func createTopic(ctx context.Context, t *testing.T, admin *kadm.Client, topic string) {
	t.Helper()
	for {
		resp, err := admin.CreateTopic(ctx, 1, 3, nil, topic)
		if err == nil && resp.Err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitLeader waits until the metadata names a leader of partition 0 of
// topic other than not, with three replicas, and returns it.
func waitLeader(ctx context.Context, t *testing.T, admin *kadm.Client, topic string, not int32) int32 {
	t.Helper()
	for {
		md, err := admin.Metadata(ctx, topic)
		if err == nil {
			if p, ok := md.Topics[topic].Partitions[0]; ok && p.Err == nil && p.Leader >= 0 && p.Leader != not && len(p.Replicas) == 3 {
				return p.Leader
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no leader of %s-0 (other than %d): %v", topic, not, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// book is what the producer had acknowledged.
type book struct {
	mu        sync.Mutex
	changed   chan struct{}
	acked     map[int64]bool
	killAt    time.Time
	afterKill time.Time // the first acknowledgement after killAt
}

func newBook() *book { return &book{changed: make(chan struct{}), acked: map[int64]bool{}} }

func (b *book) ack(seq int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.acked[seq] = true
	if !b.killAt.IsZero() && b.afterKill.IsZero() {
		b.afterKill = time.Now()
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *book) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.acked)
}

func (b *book) markKill(at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.killAt = at
}

// wait waits until cond holds under the book's lock.
func (b *book) wait(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for {
		b.mu.Lock()
		ok, changed := cond(), b.changed
		b.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s (%d acknowledged)", what, b.count())
		}
	}
}

func (b *book) waitAcked(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	b.wait(ctx, t, fmt.Sprint(n, " acknowledgements"), func() bool { return len(b.acked) >= n })
}

func (b *book) waitFirstAfterKill(ctx context.Context, t *testing.T) time.Time {
	t.Helper()
	b.wait(ctx, t, "an acknowledgement after the kill", func() bool { return !b.afterKill.IsZero() })
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.afterKill
}

// load produces 0, 1, 2, ... (key and value), a bounded number in flight,
// until stopped.
type load struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func startLoad(ctx context.Context, cl *kgo.Client, b *book) *load {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{cancel: cancel}
	inFlight := make(chan struct{}, 32)
	l.done.Go(func() {
		var sent sync.WaitGroup
		defer sent.Wait()
		for seq := int64(0); ; seq++ {
			select {
			case inFlight <- struct{}{}:
			case <-ctx.Done():
				return
			}
			v := []byte(strconv.FormatInt(seq, 10))
			sent.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: v, Value: v}, func(r *kgo.Record, err error) {
				defer sent.Done()
				<-inFlight
				if err == nil {
					b.ack(seq)
				}
			})
		}
	})
	return l
}

func (l *load) stop() {
	l.cancel()
	l.done.Wait()
}

// checkLog reads the whole partition and counts lost, duplicated and
// reordered numbers.
func checkLog(ctx context.Context, t *testing.T, seeds []string, topic string, b *book) {
	t.Helper()
	admin := newAdmin(t, seeds)
	var end int64
	for {
		offs, err := admin.ListEndOffsets(ctx, topic)
		if err == nil {
			if o, ok := offs.Lookup(topic, 0); ok && o.Err == nil {
				end = o.Offset
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("end offset: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := map[int64]int{}
	var order []int64
	for next := int64(0); next < end; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d offsets: %v", next, end, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, kerr.NotLeaderForPartition) {
				t.Logf("fetch: %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			seq, _ := strconv.ParseInt(string(r.Value), 10, 64)
			seen[seq]++
			order = append(order, seq)
			next = r.Offset + 1
		})
	}
	var lost, duplicated, reordered int
	b.mu.Lock()
	for seq := range b.acked {
		if seen[seq] == 0 {
			lost++
		}
	}
	acked := len(b.acked)
	b.mu.Unlock()
	for _, n := range seen {
		if n > 1 {
			duplicated += n - 1
		}
	}
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			reordered++
		}
	}
	t.Logf("%d acknowledged, %d records read: lost %d, duplicated %d, reordered %d", acked, len(order), lost, duplicated, reordered)
	if lost+duplicated+reordered > 0 {
		t.Errorf("lost %d, duplicated %d, reordered %d; first records %v", lost, duplicated, reordered, order[:min(len(order), 50)])
	}
}
