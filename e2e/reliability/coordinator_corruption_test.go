package reliability

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/txn"
)

// coordinatorPartitions is how many partitions the test gives
// __consumer_offsets and __transaction_state, so that one damaged partition
// has healthy neighbours.
const coordinatorPartitions = 4

// TestCorruptCoordinatorPartitions flips a byte in one partition of
// __consumer_offsets and one of __transaction_state after a clean stop, and
// restarts the node with its scrubber off, so that the coordinators' own
// reads at start find the damage. It must start, and fence only what is
// damaged:
//
//   - the broker log says which partition of each topic cannot be read;
//   - FindCoordinator answers COORDINATOR_NOT_AVAILABLE for the group and
//     the transactional id on the damaged partitions, and this node for the
//     others;
//   - franz-go (kadm) cannot fetch or commit the damaged group's offsets
//     (kerr.CoordinatorNotAvailable), and InitProducerId and
//     DescribeTransactions of the damaged id answer COORDINATOR_NOT_AVAILABLE;
//   - the groups on the other partitions kept their offsets, and a franz-go
//     consumer group of one of them consumes and commits; a transactional
//     franz-go producer with an id on a healthy partition commits;
//   - Kafka produce and fetch on an ordinary topic and an AMQP publish and
//     get work.
func TestCorruptCoordinatorPartitions(t *testing.T) {
	dataDir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir), coordinatorNode(-1), newNodeLog(t, slog.LevelWarn).option())
	s := seedCoordinators(t, n.KafkaAddr())
	closeNode(t, n)

	flipInsideBatch(t, filepath.Join(dataDir, fmt.Sprintf("%s-%d", group.OffsetsTopic, damagedPartition)))
	flipInsideBatch(t, filepath.Join(dataDir, fmt.Sprintf("%s-%d", txn.StateTopic, damagedPartition)))

	logs := newNodeLog(t, slog.LevelInfo)
	n = nodetest.Start(t, nodetest.WithDataDir(dataDir), coordinatorNode(-1), logs.option())
	for _, tp := range []string{group.OffsetsTopic, txn.StateTopic} {
		if lines := logs.find("cannot be read", tp, fmt.Sprintf("partition=%d", damagedPartition)); len(lines) == 0 {
			t.Errorf("no broker log line says partition %d of %s cannot be read", damagedPartition, tp)
		} else {
			t.Logf("broker log: %s", lines[0])
		}
	}
	s.checkFenced(t, n.KafkaAddr())
	s.checkHealthyServe(t, n.KafkaAddr())
	checkOrdinaryTraffic(t, n.KafkaAddr(), nodetest.AMQPURL(n), s.topic)
}

// TestCoordinatorPartitionGoesOffline flips the same bytes while the node
// runs, with the scrubber reading every log every 100 ms: once it takes the
// two partitions offline, their group and transactional id are fenced as
// after a restart, and the others keep serving.
func TestCoordinatorPartitionGoesOffline(t *testing.T) {
	dataDir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir), coordinatorNode(100*time.Millisecond), newNodeLog(t, slog.LevelError).option())
	s := seedCoordinators(t, n.KafkaAddr())

	var offline []*broker.Partition
	for _, tp := range []string{group.OffsetsTopic, txn.StateTopic} {
		flipInsideBatch(t, filepath.Join(dataDir, fmt.Sprintf("%s-%d", tp, damagedPartition)))
		offline = append(offline, mustTopic(t, n, tp).Partitions()[damagedPartition])
	}
	flipped := time.Now()
	if !waitFor(20*time.Second, func() bool { return offline[0].Offline() != nil && offline[1].Offline() != nil }) {
		t.Fatal("the scrubber did not take the damaged partitions offline within 20 s")
	}
	t.Logf("both partitions offline %v after the flips", time.Since(flipped).Round(time.Millisecond))
	s.checkFenced(t, n.KafkaAddr())
	s.checkHealthyServe(t, n.KafkaAddr())
}

// damagedPartition is the partition of __consumer_offsets and of
// __transaction_state that the tests damage.
const damagedPartition = 1

// coordinatorNode gives the node coordinatorPartitions partitions of
// __consumer_offsets and __transaction_state, and the scrub interval.
func coordinatorNode(scrubInterval time.Duration) nodetest.Option {
	return nodetest.WithConfig(func(c *node.Config) {
		c.Groups.OffsetsTopicPartitions = coordinatorPartitions
		c.Transactions.Partitions = coordinatorPartitions
		c.ScrubInterval = scrubInterval
	})
}

// coordinatorSeed is what seedCoordinators wrote: a group and a
// transactional id on every partition, and the offset each group committed
// last.
type coordinatorSeed struct {
	topic     string
	groups    []string // by partition of __consumer_offsets
	ids       []string // by partition of __transaction_state
	committed int64
}

// seedCoordinators creates topic "data", commits offsets for a group on
// every partition of __consumer_offsets, and runs a committed transaction
// of an id on every partition of __transaction_state.
func seedCoordinators(t *testing.T, addr string) coordinatorSeed {
	t.Helper()
	s := coordinatorSeed{
		topic:  "data",
		groups: namesPerPartition("group", groupPartition),
		ids:    namesPerPartition("txn", txnPartition),
	}
	createTopic(t, addr, s.topic, 1, nil)
	s.committed = commitGroupOffsets(t, addr, s.topic, s.groups)
	for _, id := range s.ids {
		runTransaction(t, addr, s.topic, id)
	}
	return s
}

// checkFenced requires COORDINATOR_NOT_AVAILABLE for exactly the group and
// the transactional id on the damaged partitions.
func (s coordinatorSeed) checkFenced(t *testing.T, addr string) {
	t.Helper()
	cl := newKafkaClient(t, addr)
	checkFindCoordinator(t, cl, 0, s.groups, damagedPartition)
	checkFindCoordinator(t, cl, 1, s.ids, damagedPartition)
	checkDamagedGroup(t, addr, s.topic, s.groups[damagedPartition])
	checkDamagedTransactionalID(t, cl, s.ids[damagedPartition])
}

// checkHealthyServe requires the groups on the healthy partitions to have
// kept their offsets, one of them to consume and commit as a franz-go
// consumer group, and a transactional producer with an id on a healthy
// partition to commit.
func (s coordinatorSeed) checkHealthyServe(t *testing.T, addr string) {
	t.Helper()
	cl := newKafkaClient(t, addr)
	for p, g := range s.groups {
		if p != damagedPartition {
			checkGroupOffsets(t, cl, g, s.topic, s.committed)
		}
	}
	healthy := (damagedPartition + 1) % coordinatorPartitions
	consumeAsGroup(t, addr, s.topic, s.groups[healthy], s.committed)
	runTransaction(t, addr, s.topic, s.ids[healthy])
}

// groupPartition and txnPartition are where Wharf keeps a group's and a
// transactional id's records: Kafka's abs(String.hashCode) % partitions,
// and the transaction coordinator's CRC-32 % partitions.
func groupPartition(name string) int {
	var h int32
	for _, r := range name { // ASCII names: one UTF-16 unit each
		h = 31*h + r
	}
	if h < 0 {
		h = -h
	}
	return int(h % coordinatorPartitions)
}

func txnPartition(id string) int {
	return int(crc32.ChecksumIEEE([]byte(id)) % coordinatorPartitions)
}

// namesPerPartition returns, for each partition, a name prefix-N that
// partitionOf puts there.
func namesPerPartition(prefix string, partitionOf func(string) int) []string {
	out := make([]string, coordinatorPartitions)
	for i, found := 0, 0; found < coordinatorPartitions; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if p := partitionOf(name); out[p] == "" {
			out[p], found = name, found+1
		}
	}
	return out
}

// commitGroupOffsets commits offsets for every group three times (so that
// each group's partition holds several batches) and returns the offset
// committed last, the same for all.
func commitGroupOffsets(t *testing.T, addr, topic string, groups []string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKafkaClient(t, addr))
	var offset int64
	for offset = 1; offset <= 3; offset++ {
		for _, g := range groups {
			var offs kadm.Offsets
			offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset, LeaderEpoch: -1})
			resp, err := adm.CommitOffsets(ctx, g, offs)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatalf("commit offsets of %s: %v", g, err)
			}
		}
	}
	return offset - 1
}

// runTransaction produces one record to topic in a committed transaction of
// a franz-go producer with transactional id id.
func runTransaction(t *testing.T, addr, topic, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newKafkaClient(t, addr, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic))
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("%s: begin: %v", id, err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("from "+id)).FirstErr(); err != nil {
		t.Fatalf("%s: produce: %v", id, err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("%s: commit: %v", id, err)
	}
}

// flipInsideBatch flips a byte inside the records of the second batch of a
// partition's last segment: that batch then fails its CRC.
func flipInsideBatch(t *testing.T, dir string) {
	t.Helper()
	file := lastSegment(t, dir)
	pos := batchPositions(t, file)[1]
	flipByte(t, file, pos+record.HeaderSize+2)
	t.Logf("flipped a byte of the batch at %s:%d", file, pos)
}

// checkFindCoordinator requires COORDINATOR_NOT_AVAILABLE for the key on
// the damaged partition and this node for the others (one batched v4+
// request, as franz-go sends it).
func checkFindCoordinator(t *testing.T, cl *kgo.Client, keyType int8, keys []string, damaged int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = keyType, keys
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("FindCoordinator: %v", err)
	}
	for _, c := range resp.(*kmsg.FindCoordinatorResponse).Coordinators {
		want := int16(0)
		if c.Key == keys[damaged] {
			want = kerr.CoordinatorNotAvailable.Code
		}
		if c.ErrorCode != want {
			t.Errorf("FindCoordinator type %d for %s: %v, want %v", keyType, c.Key, kerr.ErrorForCode(c.ErrorCode), kerr.ErrorForCode(want))
		}
	}
}

// checkDamagedGroup requires franz-go's admin client to get
// kerr.CoordinatorNotAvailable for the group's offsets (after retrying as
// it does, for at most two seconds).
func checkDamagedGroup(t *testing.T, addr, topic, g string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKafkaClient(t, addr, kgo.RetryTimeout(2*time.Second)))
	if _, err := adm.FetchOffsets(ctx, g); !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Errorf("fetch offsets of %s on the damaged partition: %v, want COORDINATOR_NOT_AVAILABLE", g, err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 9, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, g, offs)
	if err == nil {
		err = resp.Error()
	}
	if !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Errorf("commit offsets of %s on the damaged partition: %v, want COORDINATOR_NOT_AVAILABLE", g, err)
	}
}

// checkDamagedTransactionalID requires COORDINATOR_NOT_AVAILABLE from
// InitProducerId and DescribeTransactions for the id.
func checkDamagedTransactionalID(t *testing.T, cl *kgo.Client, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := cl.SeedBrokers()[0]
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr(id), 60_000
	resp, err := b.Request(ctx, init)
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	if code := resp.(*kmsg.InitProducerIDResponse).ErrorCode; code != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("InitProducerId of %s on the damaged partition: %v, want COORDINATOR_NOT_AVAILABLE", id, kerr.ErrorForCode(code))
	}
	desc := kmsg.NewPtrDescribeTransactionsRequest()
	desc.TransactionalIDs = []string{id}
	dresp, err := b.Request(ctx, desc)
	if err != nil {
		t.Fatalf("DescribeTransactions: %v", err)
	}
	if code := dresp.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode; code != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("DescribeTransactions of %s on the damaged partition: %v, want COORDINATOR_NOT_AVAILABLE", id, kerr.ErrorForCode(code))
	}
}

// checkGroupOffsets requires the group's committed offset to have survived
// the restart.
func checkGroupOffsets(t *testing.T, cl *kgo.Client, g, topic string, want int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := kadm.NewClient(cl).FetchOffsets(ctx, g)
	if err != nil {
		t.Errorf("fetch offsets of %s: %v", g, err)
		return
	}
	if o, ok := got.Lookup(topic, 0); !ok || o.At != want {
		t.Errorf("group %s: committed offset %+v after the restart, want %d", g, o, want)
	}
}

// consumeAsGroup consumes topic as a member of group g from the group's
// committed offset, commits what it consumed, and requires the group's
// committed offset to have moved past committed.
func consumeAsGroup(t *testing.T, addr, topic, g string, committed int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newKafkaClient(t, addr, kgo.ConsumerGroup(g), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit())
	defer cl.Close()
	for consumed := 0; consumed == 0; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("group %s: consume: %v", g, err)
		}
		consumed += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("group %s: commit: %v", g, err)
	}
	got, err := kadm.NewClient(cl).FetchOffsets(ctx, g)
	if err != nil {
		t.Fatalf("group %s: fetch offsets: %v", g, err)
	}
	if o, _ := got.Lookup(topic, 0); o.At <= committed {
		t.Errorf("group %s: committed offset %d after consuming, want past %d", g, o.At, committed)
	}
}

// checkOrdinaryTraffic requires Kafka produce and fetch and an AMQP publish
// and get to work.
func checkOrdinaryTraffic(t *testing.T, addr, amqpURL, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newKafkaClient(t, addr)
	r := kgo.StringRecord("after the restart")
	r.Topic = topic
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if got := readTopic(t, addr, topic)[0][r.Offset]; got != string(r.Value) {
		t.Errorf("record produced after the restart read back as %q", got)
	}

	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatalf("amqp dial: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("amqp channel: %v", err)
	}
	q, err := ch.QueueDeclare("after-corruption", true, false, false, false, nil)
	if err != nil {
		t.Fatalf("declare: %v", err)
	}
	if err := ch.PublishWithContext(ctx, "", q.Name, false, false, amqp.Publishing{Body: []byte("hello")}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	var (
		got    amqp.Delivery
		getErr error
	)
	if !waitFor(10*time.Second, func() bool {
		var ok bool
		got, ok, getErr = ch.Get(q.Name, true)
		return ok || getErr != nil
	}) || getErr != nil || string(got.Body) != "hello" {
		t.Errorf("the message published over AMQP came back as %q (err %v)", got.Body, getErr)
	}
}
