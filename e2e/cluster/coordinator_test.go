package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupCoordinatorKill: three `wharf serve` processes; a franz-go
// consumer group reads an RF3 topic of three partitions and commits
// after every poll, while the test kills the group's coordinator (the
// leader of its partition of __consumer_offsets) with SIGKILL. Every
// acknowledged record must be consumed, the group must carry on under the
// new coordinator, and the committed offsets, sampled throughout, must
// never go backwards.
func TestGroupCoordinatorKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startCluster(t, 3)
	logsOnFailure(t, nodes)
	seeds := seedsOf(nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const topic, groupID, total = "orders", "billing", 3000
	admin := newAdmin(t, seeds)
	createTopicN(ctx, t, admin, topic, 3)
	acked := produceNumbered(ctx, t, seeds, topic, 0, total/2)

	watch := watchCommits(ctx, admin, groupID, topic)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := map[int64]bool{}
	consume := func(until func() bool) {
		t.Helper()
		for !until() {
			fs := consumer.PollRecords(ctx, 100)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d: %v", len(seen), len(acked), ctx.Err())
			}
			fs.EachRecord(func(r *kgo.Record) {
				n, _ := strconv.ParseInt(string(r.Value), 10, 64)
				seen[n] = true
			})
			for {
				err := consumer.CommitRecords(ctx, fs.Records()...)
				if err == nil || ctx.Err() != nil {
					break
				}
				t.Logf("commit: %v (retrying)", err)
			}
		}
	}

	consume(func() bool { return len(seen) >= total/4 }) // commits every 100 records
	coordinator := groupCoordinator(ctx, t, admin, groupID, -1)
	killed := nodes[coordinator-1]
	killed.kill()
	t.Logf("killed node %d, the coordinator of %s, after %d records consumed", killed.id, groupID, len(seen))
	t.Logf("new coordinator: node %d", groupCoordinator(ctx, t, newAdmin(t, seeds), groupID, coordinator))
	for n := range produceNumbered(ctx, t, seeds, topic, total/2, total) {
		acked[n] = true
	}
	consume(func() bool { return containsAll(seen, acked) })
	killed.start()
	killed.waitReady()

	watch.stop()
	lost := 0
	for n := range acked {
		if !seen[n] {
			lost++
		}
	}
	t.Logf("%d acknowledged, %d consumed, lost %d; %d commit samples, committed offsets went backwards %d times",
		len(acked), len(seen), lost, watch.samples, len(watch.backwards))
	if lost > 0 || len(watch.backwards) > 0 {
		t.Errorf("lost %d; committed offsets went backwards: %v", lost, watch.backwards)
	}
}

// TestTxnCoordinatorKill: three processes; a franz-go transactional
// producer commits (and every fifth time aborts) transactions of ten
// records over an RF3 topic of two partitions while the test kills the
// transaction coordinator with SIGKILL. A read_committed consumer then
// reads both partitions: every record of a transaction whose commit was
// acknowledged must be there, none of one whose abort was, and the
// transactional id must go on under the new coordinator.
func TestTxnCoordinatorKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startCluster(t, 3)
	logsOnFailure(t, nodes)
	seeds := seedsOf(nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const topic, txnID = "ledger", "ledger-writer"
	admin := newAdmin(t, seeds)
	createTopicN(ctx, t, admin, topic, 2)
	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(10*time.Second), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()

	var committed, aborted, unknown int
	mustHave, mustNotHave := map[string]bool{}, map[string]bool{}
	runTxn := func(i int, beforeEnd func()) {
		values := make([]string, 10)
		for j := range values {
			values[j] = fmt.Sprintf("%d-%d", i, j)
		}
		abort := i%5 == 4
		err := producer.BeginTransaction()
		for _, v := range values {
			if err != nil {
				break
			}
			err = producer.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr()
		}
		beforeEnd()
		commit := kgo.TryCommit
		if abort || err != nil {
			commit = kgo.TryAbort
			if rerr := producer.AbortBufferedRecords(ctx); rerr != nil && err == nil {
				err = rerr
			}
		}
		endErr := producer.EndTransaction(ctx, commit)
		switch {
		case endErr == nil && commit == kgo.TryCommit:
			committed++
			for _, v := range values {
				mustHave[v] = true
			}
		case endErr == nil:
			aborted++
			for _, v := range values {
				mustNotHave[v] = true
			}
		default:
			unknown++
			t.Logf("transaction %d: produce %v, end %v", i, err, endErr)
		}
	}
	nothing := func() {}
	for i := range 20 {
		runTxn(i, nothing)
	}
	// The coordinator dies with transaction 20 open: the new one must
	// take it over from the replicated log and commit it.
	before := committed
	runTxn(20, func() {
		coordinator := txnCoordinator(ctx, t, admin, txnID, -1)
		killed := nodes[coordinator-1]
		killed.kill()
		t.Logf("killed node %d, the coordinator of %s, with a transaction open, after %d committed", killed.id, txnID, committed)
		t.Logf("new coordinator: node %d", txnCoordinator(ctx, t, newAdmin(t, seeds), txnID, coordinator))
	})
	for i := 21; i < 60; i++ {
		runTxn(i, nothing)
	}
	if committed-before < 20 {
		t.Fatalf("only %d transactions committed after the coordinator was killed", committed-before)
	}

	got := readCommitted(ctx, t, seeds, topic, 2, mustHave)
	missing, leaked := 0, 0
	for v := range mustHave {
		if !got[v] {
			missing++
		}
	}
	for v := range mustNotHave {
		if got[v] {
			leaked++
		}
	}
	t.Logf("transactions: %d committed, %d aborted, %d unknown; read_committed read %d records: %d committed missing, %d aborted visible",
		committed, aborted, unknown, len(got), missing, leaked)
	if missing+leaked > 0 {
		t.Errorf("%d records of committed transactions missing, %d of aborted ones visible", missing, leaked)
	}
}

// logsOnFailure shows the end of every node's log if the test fails.
func logsOnFailure(t *testing.T, nodes []*node) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, nd := range nodes {
				t.Logf("node %d log:\n%s", nd.id, nd.logTail())
			}
		}
	})
}

func seedsOf(nodes []*node) []string {
	seeds := make([]string, len(nodes))
	for i, nd := range nodes {
		seeds[i] = nd.kafkaAddr
	}
	return seeds
}

// createTopicN creates topic with partitions partitions of three
// replicas, retrying while the cluster elects its controller, and waits
// until every partition has a leader.
func createTopicN(ctx context.Context, t *testing.T, admin *kadm.Client, topic string, partitions int32) {
	t.Helper()
	for {
		resp, err := admin.CreateTopic(ctx, partitions, 3, nil, topic)
		if err == nil && (resp.Err == nil || errors.Is(resp.Err, kerr.TopicAlreadyExists)) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		md, err := admin.Metadata(ctx, topic)
		led := 0
		if err == nil {
			for _, p := range md.Topics[topic].Partitions {
				if p.Err == nil && p.Leader >= 0 {
					led++
				}
			}
		}
		if led == int(partitions) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: %d of %d partitions have a leader: %v", topic, led, partitions, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produceNumbered produces the numbers from..to-1 (acks=all, idempotent)
// and returns those acknowledged; it fails the test unless all are.
func produceNumbered(ctx context.Context, t *testing.T, seeds []string, topic string, from, to int64) map[int64]bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var (
		mu    sync.Mutex
		acked = map[int64]bool{}
		wg    sync.WaitGroup
	)
	for n := from; n < to; n++ {
		v := []byte(strconv.FormatInt(n, 10))
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: v, Value: v}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked[n] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(acked) != int(to-from) {
		t.Fatalf("%d of %d records acknowledged", len(acked), to-from)
	}
	return acked
}

// groupCoordinator waits until FindCoordinator names a coordinator of
// group other than not, and returns it.
func groupCoordinator(ctx context.Context, t *testing.T, admin *kadm.Client, group string, not int32) int32 {
	t.Helper()
	return awaitCoordinator(ctx, t, group, not, func() kadm.FindCoordinatorResponses { return admin.FindGroupCoordinators(ctx, group) })
}

func txnCoordinator(ctx context.Context, t *testing.T, admin *kadm.Client, id string, not int32) int32 {
	t.Helper()
	return awaitCoordinator(ctx, t, id, not, func() kadm.FindCoordinatorResponses { return admin.FindTxnCoordinators(ctx, id) })
}

func awaitCoordinator(ctx context.Context, t *testing.T, key string, not int32, find func() kadm.FindCoordinatorResponses) int32 {
	t.Helper()
	for {
		resp, ok := find()[key]
		if ok && resp.Err == nil && resp.NodeID >= 0 && resp.NodeID != not {
			return resp.NodeID
		}
		if ctx.Err() != nil {
			t.Fatalf("no coordinator of %s other than %d: %+v", key, not, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func containsAll(seen, want map[int64]bool) bool {
	for n := range want {
		if !seen[n] {
			return false
		}
	}
	return true
}

// commitWatch samples a group's committed offsets and notes any that went
// backwards.
type commitWatch struct {
	cancel    context.CancelFunc
	done      sync.WaitGroup
	samples   int
	backwards []string
}

func watchCommits(ctx context.Context, admin *kadm.Client, group, topic string) *commitWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &commitWatch{cancel: cancel}
	last := map[int32]int64{}
	w.done.Go(func() {
		for ctx.Err() == nil {
			offs, err := admin.FetchOffsets(ctx, group)
			if err == nil && offs.Error() == nil {
				w.samples++
				offs.Each(func(o kadm.OffsetResponse) {
					if o.Topic != topic {
						return
					}
					if prev, ok := last[o.Partition]; ok && o.At < prev {
						w.backwards = append(w.backwards, fmt.Sprintf("%s-%d: %d after %d", topic, o.Partition, o.At, prev))
					}
					last[o.Partition] = max(last[o.Partition], o.At)
				})
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	return w
}

func (w *commitWatch) stop() {
	w.cancel()
	w.done.Wait()
}

// readCommitted reads every partition of topic with read_committed from
// the start until it has read every value of want (or ctx ends), and
// returns the values read: by then it has passed every record written
// before the last of them.
func readCommitted(ctx context.Context, t *testing.T, seeds []string, topic string, partitions int32, want map[string]bool) map[string]bool {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	got := map[string]bool{}
	missing := len(want)
	for missing > 0 && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if want[v] && !got[v] {
				missing--
			}
			got[v] = true
		})
	}
	return got
}
