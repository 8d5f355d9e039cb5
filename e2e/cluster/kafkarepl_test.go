package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Kafka's replication semantics on three `wharf serve` processes:
// min.insync.replicas, the produce timeout, OffsetForLeaderEpoch across a
// leader change, and preferred leaders.

// TestMinInsyncReplicasCluster: a topic created with
// min.insync.replicas=3 takes acks=all while its three replicas are in
// sync; with one killed, acks=all gets NOT_ENOUGH_REPLICAS and acks=1
// still writes; lowered to 2 with IncrementalAlterConfigs, acks=all goes
// through again. DescribeConfigs reports the override's source.
func TestMinInsyncReplicasCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "strict"
	nodes, admin, leader := clusterWithTopic(ctx, t, topic, "3")

	follower := nodes[leader.id%3]
	follower.kill()
	waitISR(ctx, t, leader, topic, 2)
	if code := produceRaw(ctx, t, leader, topic, -1, 5000); !errors.Is(code, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with 2 of 3 in sync, min.insync.replicas=3: %v, want NOT_ENOUGH_REPLICAS", code)
	}
	if code := produceRaw(ctx, t, leader, topic, 1, 5000); code != nil {
		t.Fatalf("acks=1 with 2 of 3 in sync: %v", code)
	}

	two := "2"
	alter, err := admin.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &two}}, topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = alter.On(topic, nil); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("alter min.insync.replicas: %v", err)
	}
	// Every node applies the change from the metadata log; the leader
	// may take a moment.
	for {
		code := produceRaw(ctx, t, leader, topic, -1, 5000)
		if code == nil {
			break
		}
		if !errors.Is(code, kerr.NotEnoughReplicas) || ctx.Err() != nil {
			t.Fatalf("acks=all with 2 of 3 in sync, min.insync.replicas=2: %v", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rcs, err := admin.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rc.Configs, func(c kadm.Config) bool { return c.Key == "min.insync.replicas" })
	if i < 0 || rc.Configs[i].MaybeValue() != "2" || rc.Configs[i].Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("min.insync.replicas as described: %+v", rc.Configs)
	}
}

// TestProduceTimeoutCluster: with both followers of a partition stopped
// (SIGSTOP), an acks=all Produce cannot commit; the leader answers
// REQUEST_TIMED_OUT once the request's TimeoutMillis has passed, as
// Kafka's delayed produce does, rather than holding the request. The
// topic's min.insync.replicas=1 lets the append in whatever the leader
// already knows of its followers.
func TestProduceTimeoutCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "slow"
	nodes, _, leader := clusterWithTopic(ctx, t, topic, "1")

	followers := slices.DeleteFunc(slices.Clone(nodes), func(nd *node) bool { return nd == leader })
	for _, f := range followers {
		f.pause() // stopped before the request: else they may still take it
	}
	// Raft's check-quorum deposes the leader an election timeout (1 s)
	// after it last heard from a majority: a timeout well below that is
	// answered while it still leads.
	const timeout = 300
	start := time.Now()
	code := produceRaw(ctx, t, leader, topic, -1, timeout)
	took := time.Since(start)
	for _, f := range followers {
		f.signal(syscall.SIGCONT)
	}
	if !errors.Is(code, kerr.RequestTimedOut) {
		t.Fatalf("acks=all with the followers stopped: %v after %v, want REQUEST_TIMED_OUT", code, took)
	}
	if took < timeout*time.Millisecond {
		t.Fatalf("REQUEST_TIMED_OUT after %v, before the request's %d ms", took, timeout)
	}
	t.Logf("REQUEST_TIMED_OUT after %v (TimeoutMillis %d)", took.Round(time.Millisecond), timeout)

	// Resumed, the cluster takes acks=all again.
	producer := newClient(t, seedsOf(nodes), kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(30*time.Second))
	if err := producer.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Fatalf("acks=all after SIGCONT: %v", err)
	}
}

// TestConsumerAcrossLeaderKill: a franz-go consumer reads an RF3
// partition while an idempotent acks=all producer writes to it and the
// partition's leader is killed with SIGKILL. franz-go validates its
// position with OffsetForLeaderEpoch on the new leader (KIP-320); the
// consumer, which may not reset (NoResetOffset), must see neither
// OFFSET_OUT_OF_RANGE nor data loss, and reads every acknowledged number
// once, in order. The new leader answers OffsetForLeaderEpoch for the old
// epoch with an end at or past everything acknowledged under it, and
// fences a request that still names the old epoch as current.
func TestConsumerAcrossLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startCluster(t, 3)
	logsOnFailure(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seeds := seedsOf(nodes)
	admin := newAdmin(t, seeds)
	const topic = "epochs"
	createTopic(ctx, t, admin, topic)
	old := nodes[waitLeader(ctx, t, admin, topic, -1)-1]

	producer := newClient(t, seeds, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	book := newBook()
	load := startLoad(ctx, producer, book)
	defer load.stop()
	epochLoads := new(requestCounter)
	consumer := newClient(t, seeds, kgo.WithHooks(epochLoads),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	seen := newSeen()
	consumed := make(chan error, 1)
	consumeCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	go func() { consumed <- seen.consume(consumeCtx, consumer) }()

	book.waitAcked(ctx, t, 300)
	seen.waitCount(ctx, t, 100)
	before, err := old.partitions(ctx, t, topic)
	if err != nil {
		t.Fatal(err)
	}
	oldEpoch := before[0].epoch
	ackedBefore := book.count()
	old.kill()
	t.Logf("killed node %d, the leader at epoch %d, after %d acknowledgements", old.id, oldEpoch, ackedBefore)
	leader := nodes[waitLeader(ctx, t, admin, topic, int32(old.id))-1]
	book.waitAcked(ctx, t, book.count()+300)
	load.stop()

	want := book.count()
	seen.waitAll(ctx, t, book)
	stopConsumer()
	if err := <-consumed; err != nil {
		t.Fatalf("consumer: %v", err)
	}
	t.Logf("%d acknowledged, %d consumed in order, %d OffsetForLeaderEpoch requests", want, seen.count(), epochLoads.count(kmsg.OffsetForLeaderEpoch))
	if epochLoads.count(kmsg.OffsetForLeaderEpoch) == 0 {
		t.Errorf("franz-go never validated its position with OffsetForLeaderEpoch")
	}

	now, err := leader.partitions(ctx, t, topic)
	if err != nil {
		t.Fatal(err)
	}
	newEpoch := now[0].epoch
	got := epochEndOf(ctx, t, leader, topic, newEpoch, oldEpoch)
	if got.ErrorCode != 0 || got.LeaderEpoch != oldEpoch || got.EndOffset < int64(ackedBefore) {
		t.Errorf("epoch %d on the new leader (epoch %d): error %d, epoch %d, end %d; want epoch %d ending at or past %d",
			oldEpoch, newEpoch, got.ErrorCode, got.LeaderEpoch, got.EndOffset, oldEpoch, ackedBefore)
	}
	if got := epochEndOf(ctx, t, leader, topic, oldEpoch, oldEpoch); got.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Errorf("current leader epoch %d, now %d: error %d, want FENCED_LEADER_EPOCH", oldEpoch, newEpoch, got.ErrorCode)
	}
	if got := epochEndOf(ctx, t, leader, topic, newEpoch+1, oldEpoch); got.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Errorf("current leader epoch %d, now %d: error %d, want UNKNOWN_LEADER_EPOCH", newEpoch+1, newEpoch, got.ErrorCode)
	}
}

// TestPreferredLeaders: three nodes start with automatic balancing off,
// then are restarted one by one (SIGTERM) with it on, checked every
// second. The first restarted is partition 0's preferred replica (its
// first): the partition stays led by a node whose balancer is off until
// kadm.ElectLeaders moves it back. Once the rolling restart is over,
// every partition is led by its preferred replica again, so leaders are
// spread over the nodes, although each node lost its leaderships while
// it was down.
func TestPreferredLeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := prepareCluster(t, 3)
	for _, nd := range nodes {
		nd.extraArgs = []string{"--auto-leader-rebalance=false"}
		nd.start()
	}
	for _, nd := range nodes {
		nd.waitReady()
	}
	logsOnFailure(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := newAdmin(t, seedsOf(nodes))
	const topic = "spread"
	createTopicN(ctx, t, admin, topic, 3)
	inSync := func(p partitionView) bool { return len(p.isr) == 3 }
	parts := waitPartitions(ctx, t, nodes[0], topic, "every replica in sync", inSync)

	balancing := []string{"--leader-imbalance-check-interval=1s"}
	first := nodes[parts[0].replicas[0]-1]
	first.extraArgs = balancing
	restart(ctx, t, nodes, topic, first)
	parts = waitPartitions(ctx, t, first, topic, "every replica in sync", inSync)
	if parts[0].leader == int32(first.id) {
		t.Fatalf("%s-0 went back to its preferred replica %d, led by a node whose balancer is off", topic, first.id)
	}
	t.Logf("%s-0 led by node %d, prefers node %d", topic, parts[0].leader, first.id)
	elected, err := admin.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for p, r := range elected[topic] {
		if r.Err != nil && !(p != 0 && errors.Is(r.Err, kerr.ElectionNotNeeded)) {
			t.Errorf("ElectLeaders %s-%d: %v", topic, p, r.Err)
		}
	}
	waitPartitions(ctx, t, first, topic, "every partition led by its preferred replica", ledByPreferred)

	for _, nd := range nodes {
		if nd != first {
			nd.extraArgs = balancing
			restart(ctx, t, nodes, topic, nd)
		}
	}
	parts = waitPartitions(ctx, t, first, topic, "every partition led by its preferred replica after the rolling restart", ledByPreferred)
	t.Logf("after the rolling restart: %+v", parts)
}

func ledByPreferred(p partitionView) bool { return p.leader == p.replicas[0] }

// restart stops nd with SIGTERM, waits until the other nodes elected
// leaders of topic's partitions it led, starts it again, and waits until
// every replica is in sync again.
func restart(ctx context.Context, t *testing.T, nodes []*node, topic string, nd *node) {
	t.Helper()
	other := nodes[nd.id%len(nodes)]
	nd.terminate()
	waitPartitions(ctx, t, other, topic, fmt.Sprint("leaders other than node ", nd.id), func(p partitionView) bool {
		return p.leader != int32(nd.id)
	})
	nd.start()
	nd.waitReady()
	waitPartitions(ctx, t, other, topic, fmt.Sprint("node ", nd.id, " back in sync"), func(p partitionView) bool {
		return len(p.isr) == len(nodes)
	})
}

// waitPartitions waits until node from, asked alone, names a leader of
// every partition of topic and every partition meets ok; it returns them.
func waitPartitions(ctx context.Context, t *testing.T, from *node, topic, what string, ok func(partitionView) bool) map[int32]partitionView {
	t.Helper()
	for {
		parts, err := from.partitions(ctx, t, topic)
		good := err == nil && len(parts) > 0
		for _, p := range parts {
			good = good && p.leader >= 0 && ok(p)
		}
		if good {
			return parts
		}
		if ctx.Err() != nil {
			t.Fatalf("%s, asking node %d: waiting for %s: %v %+v", topic, from.id, what, err, parts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requestCounter is a kgo hook counting the requests written, by key.
type requestCounter struct {
	mu     sync.Mutex
	counts map[int16]int
}

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[int16]int{}
	}
	c.counts[key]++
}

func (c *requestCounter) count(key kmsg.Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[int16(key)]
}

// seen is what a consumer of the numbers startLoad writes has read.
type seen struct {
	mu      sync.Mutex
	changed chan struct{}
	nums    map[int64]bool
	last    int64
}

func newSeen() *seen {
	return &seen{changed: make(chan struct{}), nums: map[int64]bool{}, last: -1}
}

// consume polls until ctx ends, failing on a number read twice or out of
// order, and on any fetch error but the retriable ones of a leader
// change.
func (s *seen) consume(ctx context.Context, cl *kgo.Client) error {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && !kerr.IsRetriable(err) {
				ferr = errors.Join(ferr, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			n, _ := strconv.ParseInt(string(r.Value), 10, 64)
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.nums[n] || n < s.last {
				bad = fmt.Errorf("number %d at offset %d read after %d", n, r.Offset, s.last)
			}
			s.nums[n], s.last = true, n
			close(s.changed)
			s.changed = make(chan struct{})
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.nums)
}

// waitFor waits until cond holds under the lock.
func (s *seen) waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for {
		s.mu.Lock()
		ok, changed := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("consumer: timed out waiting for %s (%d read)", what, s.count())
		}
	}
}

func (s *seen) waitCount(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	s.waitFor(ctx, t, fmt.Sprint(n, " records"), func() bool { return len(s.nums) >= n })
}

// waitAll waits until every number b acknowledged was read.
func (s *seen) waitAll(ctx context.Context, t *testing.T, b *book) {
	t.Helper()
	b.mu.Lock()
	acked := maps.Clone(b.acked)
	b.mu.Unlock()
	s.waitFor(ctx, t, fmt.Sprint("all ", len(acked), " acknowledged numbers"), func() bool {
		for n := range acked {
			if !s.nums[n] {
				return false
			}
		}
		return true
	})
}

// epochEndOf asks nd alone where epoch ends in partition 0 of topic,
// naming current as the current leader epoch.
func epochEndOf(ctx context.Context, t *testing.T, nd *node, topic string, current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(nd.kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("OffsetForLeaderEpoch to node %d: %v", nd.id, err)
	}
	return resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
}

// clusterWithTopic starts three nodes and creates topic, one partition of
// three replicas with min.insync.replicas minISR, and returns the nodes,
// an admin client and the partition's leader, once an acks=all Produce
// to it succeeded.
func clusterWithTopic(ctx context.Context, t *testing.T, topic, minISR string) ([]*node, *kadm.Client, *node) {
	t.Helper()
	nodes := startCluster(t, 3)
	logsOnFailure(t, nodes)
	admin := newAdmin(t, seedsOf(nodes))
	createTopicWith(ctx, t, admin, topic, map[string]*string{"min.insync.replicas": &minISR})
	leader := nodes[waitLeader(ctx, t, admin, topic, -1)-1]
	if code := produceRaw(ctx, t, leader, topic, -1, 5000); code != nil {
		t.Fatalf("acks=all with every replica in sync: %v", code)
	}
	return nodes, admin, leader
}

// createTopicWith creates topic with one partition, three replicas and
// configs, retrying while the cluster elects its controller.
func createTopicWith(ctx context.Context, t *testing.T, admin *kadm.Client, topic string, configs map[string]*string) {
	t.Helper()
	for {
		resp, err := admin.CreateTopic(ctx, 1, 3, configs, topic)
		if err == nil && resp.Err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func newClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// waitISR waits until nd, asked alone, reports n in-sync replicas of
// partition 0 of topic.
func waitISR(ctx context.Context, t *testing.T, nd *node, topic string, n int) {
	t.Helper()
	for {
		v, err := nd.partitions(ctx, t, topic)
		if err == nil && len(v[0].isr) == n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("node %d never reported %d in-sync replicas of %s-0: %v %+v", nd.id, n, topic, err, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produceRaw sends one Produce request of one record to partition 0 of
// topic straight to nd, with acks (-1 or 1) and TimeoutMillis, no retry
// and no re-routing, and returns the partition's error (nil:
// acknowledged).
func produceRaw(ctx context.Context, t *testing.T, nd *node, topic string, acks int16, timeoutMillis int32) error {
	t.Helper()
	// Kafka 4.0's Produce (v12) names topics, not topic ids; kgo sends
	// every Produce with the acks it was made with.
	opts := []kgo.Opt{kgo.SeedBrokers(nd.kafkaAddr), kgo.MaxVersions(kversion.V4_0_0())}
	if acks == 1 {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, timeoutMillis
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = oneRecordBatch([]byte(fmt.Sprint("acks=", acks)))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("produce to node %d: %v", nd.id, err)
	}
	return kerr.ErrorForCode(resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
}
