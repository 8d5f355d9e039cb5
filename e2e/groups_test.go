package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	segkafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// Consumer group tests: members of each client library join and leave a
// group while records are being produced. Every record must be consumed
// at least once, each partition's records in offset order by whoever owns
// it, and no partition by two members at a time.

const (
	groupTopicPartitions = 6
	groupLoadRecords     = 3000
)

// fastGroups gives the group coordinator short delays, so that rebalances
// take a fraction of a second.
var fastGroups = nodetest.WithConfig(func(c *node.Config) {
	c.Groups.InitialRebalanceDelay = 100 * time.Millisecond
	c.Groups.MinSessionTimeout = 500 * time.Millisecond
	c.Groups.ConsumerSessionTimeout = 3 * time.Second
	c.Groups.ConsumerHeartbeatInterval = 100 * time.Millisecond
})

// startGroupNode starts a node with fastGroups.
func startGroupNode(t *testing.T, opts ...nodetest.Option) *node.Node {
	t.Helper()
	return startNode(t, append([]nodetest.Option{fastGroups}, opts...)...)
}

// groupChecker records what the members of one group consume and checks
// the group's guarantees as it goes.
type groupChecker struct {
	mu         sync.Mutex
	owner      map[int32]string           // partition -> member, for clients that report assignments
	last       map[string]map[int32]int64 // member -> partition -> last offset in this ownership or session
	seen       map[int32]map[int64]bool
	consumed   int
	violations []string
}

func newGroupChecker() *groupChecker {
	return &groupChecker{owner: map[int32]string{}, last: map[string]map[int32]int64{}, seen: map[int32]map[int64]bool{}}
}

func (c *groupChecker) violate(format string, args ...any) {
	if len(c.violations) < 20 {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	}
}

// assigned records that a member got partitions: nobody else may hold them.
func (c *groupChecker) assigned(member string, parts []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range parts {
		if o, ok := c.owner[p]; ok && o != member {
			c.violate("partition %d assigned to %s while %s still holds it", p, member, o)
		}
		c.owner[p] = member
		c.lastOf(member)[p] = -1
	}
}

// released records that a member gave partitions up.
func (c *groupChecker) released(member string, parts []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range parts {
		if c.owner[p] == member {
			delete(c.owner, p)
		}
	}
}

func (c *groupChecker) lastOf(member string) map[int32]int64 {
	m := c.last[member]
	if m == nil {
		m = map[int32]int64{}
		c.last[member] = m
	}
	return m
}

// newSession starts a new generation for a member that does not report
// its assignments: it may start over from committed offsets.
func (c *groupChecker) newSession(member string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, member)
}

// record is called as a member processes a record. With checkOwner, the
// member must hold the partition (for clients that report assignments).
// Either way, within one ownership (or session) a member's offsets of a
// partition only go forward.
func (c *groupChecker) record(member string, p int32, off int64, checkOwner bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.owner[p]; checkOwner && o != member {
		c.violate("%s processed %d@%d while the partition belongs to %q", member, p, off, o)
	}
	if last, ok := c.lastOf(member)[p]; ok && off <= last {
		c.violate("%s processed %d@%d after %d@%d: out of order", member, p, off, p, last)
	}
	c.lastOf(member)[p] = off
	if c.seen[p] == nil {
		c.seen[p] = map[int64]bool{}
	}
	if !c.seen[p][off] {
		c.seen[p][off] = true
		c.consumed++
	}
}

func (c *groupChecker) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.consumed
}

// waitConsumed polls until n distinct records were consumed.
func (c *groupChecker) waitConsumed(t *testing.T, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for c.distinct() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d records consumed before the deadline", what, c.distinct(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verify checks that no rule was broken and that every offset below each
// partition's end was consumed.
func (c *groupChecker) verify(t *testing.T, ends map[int32]int64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.violations {
		t.Error(v)
	}
	for p, end := range ends {
		for off := range end {
			if !c.seen[p][off] {
				t.Fatalf("record %d@%d was never consumed (partition end %d)", p, off, end)
			}
		}
	}
}

// produceLoad produces groupLoadRecords records round-robin over the
// topic's partitions in paced batches (about 1.5 s in all), so that
// members join and leave while records arrive. Done is closed at the end.
func produceLoad(t *testing.T, n *node.Node, topic string) (done <-chan struct{}) {
	t.Helper()
	cl := newFranz(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	ch := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(ch)
		const batch = 100
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < groupLoadRecords; i += batch {
			var recs []*kgo.Record
			for j := i; j < i+batch; j++ {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(j % groupTopicPartitions), Value: []byte(strconv.Itoa(j))})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				errs <- err
				return
			}
			<-tick.C
		}
	}()
	t.Cleanup(func() {
		<-ch
		select {
		case err := <-errs:
			t.Errorf("producing the load: %v", err)
		default:
		}
	})
	return ch
}

// member is one group member of some client library.
type member interface{ stop() }

// runGroupScenario runs the shared scenario: members join one at a time
// as records arrive, the first leaves in the middle, and the rest consume
// everything.
func runGroupScenario(t *testing.T, n *node.Node, topic string, chk *groupChecker, start func(name string) member) {
	adm := newAdmin(t, n)
	createTopic(t, adm, topic, groupTopicPartitions, nil)
	loaded := produceLoad(t, n, topic)
	a := start("a")
	chk.waitConsumed(t, 300, "with one member")
	b := start("b")
	chk.waitConsumed(t, 1200, "with two members")
	c := start("c")
	chk.waitConsumed(t, 2000, "with three members")
	a.stop() // leaves the group: b and c take over its partitions
	<-loaded
	chk.waitConsumed(t, groupLoadRecords, "after a left")
	b.stop()
	c.stop()
	chk.verify(t, endOffsets(t, adm, topic))
}

// franzMember is a kgo group consumer that reports its assignments.
type franzMember struct {
	cl   *kgo.Client
	done chan struct{}
}

func startFranzMember(t *testing.T, n *node.Node, group, topic, name string, chk *groupChecker, opts ...kgo.Opt) *franzMember {
	t.Helper()
	m := &franzMember{done: make(chan struct{})}
	base := []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ClientID("franz-" + name),
		kgo.SessionTimeout(3 * time.Second),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(5 * time.Second),
		kgo.AutoCommitInterval(100 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			chk.assigned(name, a[topic])
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			// Commit what was processed before giving the partitions up,
			// as the default revoke callback would.
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("%s: commit on revoke: %v", name, err)
			}
			chk.released(name, r[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			chk.released(name, l[topic])
		}),
	}
	m.cl = newFranz(t, n, append(base, opts...)...)
	go func() {
		defer close(m.done)
		for {
			fetches := m.cl.PollFetches(context.Background())
			if fetches.IsClientClosed() {
				return
			}
			fetches.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Logf("%s: fetch error on %s[%d]: %v", name, topic, p, err)
				}
			})
			fetches.EachRecord(func(r *kgo.Record) { chk.record(name, r.Partition, r.Offset, true) })
			m.cl.AllowRebalance()
		}
	}()
	return m
}

func (m *franzMember) stop() {
	m.cl.Close() // revokes (committing), then leaves the group
	<-m.done
}

func TestGroupFranzBalancers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts []kgo.Opt
	}{
		{"range", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}},
		{"cooperative-sticky", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"kip848-uniform", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer()}},
		{"kip848-range", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n := startGroupNode(t)
			chk := newGroupChecker()
			group, topic := "g-"+c.name, "t-"+c.name
			runGroupScenario(t, n, topic, chk, func(name string) member {
				return startFranzMember(t, n, group, topic, name, chk, c.opts...)
			})
			if strings.HasPrefix(c.name, "kip848") {
				// The group really used the KIP-848 protocol.
				adm := newAdmin(t, n)
				listed, err := adm.ListGroupsByType(testContext(t), []string{"consumer"})
				if err != nil || len(listed) != 1 {
					t.Fatalf("consumer-type groups: %v %v", listed, err)
				}
			}
		})
	}
}

// kafkaGoMember is a segmentio/kafka-go Reader with a GroupID, consuming
// with FetchMessage and committing each message with CommitMessages.
type kafkaGoMember struct {
	r      *segkafka.Reader
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *kafkaGoMember) stop() {
	m.cancel()
	<-m.done
	m.r.Close() // leaves the group
}

func TestGroupKafkaGo(t *testing.T) {
	t.Parallel()
	n := startGroupNode(t)
	chk := newGroupChecker()
	runGroupScenario(t, n, "kafkago-group", chk, func(name string) member {
		r := segkafka.NewReader(segkafka.ReaderConfig{
			Brokers:           []string{n.KafkaAddr()},
			GroupID:           "kafkago",
			Topic:             "kafkago-group",
			MaxWait:           200 * time.Millisecond,
			HeartbeatInterval: 200 * time.Millisecond,
			SessionTimeout:    3 * time.Second,
			RebalanceTimeout:  5 * time.Second,
			JoinGroupBackoff:  100 * time.Millisecond,
			StartOffset:       segkafka.FirstOffset,
		})
		ctx, cancel := context.WithCancel(context.Background())
		m := &kafkaGoMember{r: r, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(m.done)
			for {
				msg, err := r.FetchMessage(ctx)
				if err != nil {
					return
				}
				// A rebalance is counted before the generation's
				// messages are fetched: this message may start over
				// from a committed offset.
				if r.Stats().Rebalances > 0 {
					chk.newSession(name)
				}
				chk.record(name, int32(msg.Partition), msg.Offset, false)
				if err := r.CommitMessages(ctx, msg); err != nil && ctx.Err() == nil {
					t.Logf("%s: commit: %v", name, err)
				}
			}
		}()
		return m
	})
}

// saramaMember is a sarama ConsumerGroup member; its handler reports the
// claims of each session.
type saramaMember struct {
	cg     sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *saramaMember) stop() {
	m.cancel()
	<-m.done
	m.cg.Close()
}

type saramaHandler struct {
	name, topic string
	chk         *groupChecker
}

func (h saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.chk.assigned(h.name, s.Claims()[h.topic])
	return nil
}

func (h saramaHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	s.Commit()
	h.chk.released(h.name, s.Claims()[h.topic])
	return nil
}

func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		h.chk.record(h.name, msg.Partition, msg.Offset, true)
		s.MarkMessage(msg, "")
	}
	return nil
}

func TestGroupSarama(t *testing.T) {
	t.Parallel()
	n := startGroupNode(t)
	chk := newGroupChecker()
	topic := "sarama-group"
	runGroupScenario(t, n, topic, chk, func(name string) member {
		cfg := saramaConfig(sarama.V2_8_0_0)
		cfg.ClientID = "sarama-" + name
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
		cfg.Consumer.Group.Session.Timeout = 3 * time.Second
		cfg.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
		cfg.Consumer.Group.Rebalance.Timeout = 5 * time.Second
		cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
		cg, err := sarama.NewConsumerGroup([]string{n.KafkaAddr()}, "sarama", cfg)
		if err != nil {
			t.Fatalf("sarama.NewConsumerGroup: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		m := &saramaMember{cg: cg, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(m.done)
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, saramaHandler{name, topic, chk}); err != nil && ctx.Err() == nil {
					t.Logf("%s: consume: %v", name, err)
				}
			}
		}()
		return m
	})
}

// TestGroupResumesAfterRestart commits part of a topic, restarts the
// broker on the same data directory and checks that the group resumes
// exactly at its committed offsets.
func TestGroupResumesAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startGroupNode(t, nodetest.WithDataDir(dir))
	adm := newAdmin(t, first)
	const topic, group = "restart-group", "restart"
	createTopic(t, adm, topic, 2, nil)
	producer := newFranz(t, first, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 200 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))})
	}
	produceSync(t, producer, recs...)

	consumer := newFranz(t, first, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(100*time.Millisecond), kgo.SessionTimeout(3*time.Second))
	got := 0
	for got < 70 {
		fetches := consumer.PollRecords(testContext(t), 30)
		got += len(fetches.Records())
		if err := consumer.CommitRecords(testContext(t), fetches.Records()...); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	committed, err := adm.FetchOffsets(testContext(t), group)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	committed.Each(func(o kadm.OffsetResponse) { want[o.Partition] = o.At })
	if len(want) == 0 {
		t.Fatal("nothing committed")
	}
	consumer.Close()
	producer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}

	second := startGroupNode(t, nodetest.WithDataDir(dir))
	adm2 := newAdmin(t, second)
	again, err := adm2.FetchOffsets(testContext(t), group)
	if err != nil {
		t.Fatal(err)
	}
	again.Each(func(o kadm.OffsetResponse) {
		if want[o.Partition] != o.At {
			t.Errorf("after restart partition %d is committed at %d, was %d", o.Partition, o.At, want[o.Partition])
		}
	})
	resumed := newFranz(t, second, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(100*time.Millisecond))
	first0 := map[int32]int64{}
	for _, r := range consumeN(t, resumed, 200-int(want[0]+want[1])) {
		if _, ok := first0[r.Partition]; !ok {
			first0[r.Partition] = r.Offset
		}
	}
	for _, p := range slices.Sorted(maps.Keys(first0)) {
		if first0[p] != want[p] {
			t.Errorf("partition %d resumed at %d, committed %d", p, first0[p], want[p])
		}
	}
}
