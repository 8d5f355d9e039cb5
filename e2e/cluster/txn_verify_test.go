package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnVerifyAcrossNodes: produce verification (KIP-890 part 1) when
// the transactional id's coordinator and the partition's leader are
// different nodes of three `wharf serve` processes. A franz-go
// transactional producer writes to every partition of a six-partition
// topic, committing some transactions and aborting others: every batch
// to a partition led elsewhere is verified with the coordinator, and a
// read_committed consumer must see exactly the committed records. Then a
// hanging transaction: a transactional batch, sent with kmsg straight to
// a leader that does not coordinate its id, for a partition never added
// to the transaction, must be refused INVALID_TXN_STATE; so must one sent
// after the transaction that had the partition was aborted. Last, the
// coordinator's node is killed: the producer's next transactions are
// verified with the new coordinator.
func TestTxnVerifyAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startCluster(t, 3)
	logsOnFailure(t, nodes)
	seeds := seedsOf(nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	const topic, txnID, partitions = "payments", "payments-writer", 6
	admin := newAdmin(t, seeds)
	createTopicN(ctx, t, admin, topic, partitions)
	electPreferredLeaders(ctx, t, admin, nodes, topic, partitions)
	coordinator := txnCoordinator(ctx, t, admin, txnID, -1)
	p, leader := partitionLedElsewhere(ctx, t, admin, topic, coordinator)
	t.Logf("%s is coordinated by node %d; %s-%d is led by node %d", txnID, coordinator, topic, p, leader)

	newProducer := func() *kgo.Client {
		producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(txnID),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(20*time.Second),
			kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
		if err != nil {
			t.Fatal(err)
		}
		return producer
	}
	producer := newProducer()
	defer func() { producer.Close() }()
	mustHave, mustNotHave := map[string]bool{}, map[string]bool{}
	// runTxns runs transactions from to to; with newClientOnUnknownBroker,
	// one whose produce franz-go fails with "unknown broker" is run again
	// on a new client (see below).
	runTxns := func(from, to int, newClientOnUnknownBroker bool) {
		for i, attempt := from, 0; i < to; i++ {
			if err := producer.BeginTransaction(); err != nil {
				t.Fatalf("transaction %d: begin: %v", i, err)
			}
			var records []*kgo.Record
			for part := range int32(partitions) {
				v := fmt.Sprintf("%d-%d-%d", i, attempt, part)
				records = append(records, &kgo.Record{Partition: part, Value: []byte(v)})
			}
			if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
				// KNOWN GAP (issue 13): right after the coordinator's
				// node is killed, franz-go may find the coordinator it
				// cached gone from a Metadata answer between loading it
				// and sending AddPartitionsToTxn; it then fails the
				// producer id for good ("unknown broker"). Wharf leaves a
				// node it sees down out of Metadata at once, where Kafka
				// lists it until the controller fences it. Until that is
				// changed, the test does what a user must: a new client,
				// whose InitProducerId aborts the open transaction; the
				// retry must go through and nothing of the aborted
				// attempt may be read.
				if !newClientOnUnknownBroker || attempt > 0 || !strings.Contains(err.Error(), "unknown broker") {
					t.Fatalf("transaction %d: produce: %v", i, err)
				}
				t.Logf("transaction %d: produce: %v; run again on a new client", i, err)
				producer.Close()
				producer = newProducer()
				for _, r := range records {
					mustNotHave[string(r.Value)] = true
				}
				attempt++
				i--
				continue
			}
			attempt = 0
			commit := kgo.TransactionEndTry(i%3 != 2)
			if err := producer.EndTransaction(ctx, commit); err != nil {
				t.Fatalf("transaction %d: end (commit %v): %v", i, commit, err)
			}
			for _, r := range records {
				if commit {
					mustHave[string(r.Value)] = true
				} else {
					mustNotHave[string(r.Value)] = true
				}
			}
		}
	}
	checkCommitted := func() {
		t.Helper()
		got := readCommitted(ctx, t, seeds, topic, partitions, mustHave)
		if missing, leaked := countMissing(got, mustHave), len(mustNotHave)-countMissing(got, mustNotHave); missing+leaked > 0 {
			t.Fatalf("read_committed: %d records of committed transactions missing, %d of aborted ones visible", missing, leaked)
		}
	}
	runTxns(0, 9, false)
	checkCommitted()

	// The hanging transaction, with a raw producer of another id.
	const hangingID = "hanging-writer"
	raw, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	hc := txnCoordinator(ctx, t, admin, hangingID, -1)
	pid, epoch := initTxnProducer(ctx, t, raw, hangingID)
	p, leader = partitionLedElsewhere(ctx, t, admin, topic, hc)
	t.Logf("%s (producer %d) is coordinated by node %d; %s-%d is led by node %d", hangingID, pid, hc, topic, p, leader)
	txnBatch := func(seq int32) *kmsg.ProduceRequest {
		return txnProduceRequest(hangingID, pid, epoch, topic, p, seq)
	}
	if code := produceToLeader(ctx, t, raw, admin, topic, p, txnBatch(0)); code != kerr.InvalidTxnState.Code {
		t.Fatalf("a transactional batch for a partition never added to the transaction: got %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}

	// Added, the batch is taken; once the transaction is aborted, a late
	// batch is refused again.
	addTxnPartition(ctx, t, raw, hangingID, pid, epoch, topic, p)
	if code := produceToLeader(ctx, t, raw, admin, topic, p, txnBatch(0)); code != 0 {
		t.Fatalf("a transactional batch for a partition added to the transaction: %v", kerr.ErrorForCode(code))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = hangingID, pid, epoch, false
	retryTxnCall(ctx, t, "EndTxn", func() (int16, error) {
		resp, err := end.RequestWith(ctx, raw)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
	awaitStable(ctx, t, admin, topic, p)
	if code := produceToLeader(ctx, t, raw, admin, topic, p, txnBatch(1)); code != kerr.InvalidTxnState.Code {
		t.Fatalf("a transactional batch after its transaction was aborted: got %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}

	// The coordinator moves: its node is killed. Verifications go to the
	// new one, and the producer rides over the move with retries.
	nodes[coordinator-1].kill()
	moved := txnCoordinator(ctx, t, newAdmin(t, seeds), txnID, coordinator)
	t.Logf("killed node %d; %s is now coordinated by node %d", coordinator, txnID, moved)
	runTxns(9, 15, true)
	checkCommitted()
}

// TestTxnVerifyCoordinatorKilled: the coordinator of a transactional id
// is killed (SIGKILL) just before a batch of its open transaction reaches
// a partition led by another node, which verifies it with the
// coordinator. The leader gives the dead coordinator up as soon as the
// election of its partition of __transaction_state starts, and asks the
// new one: the batch is answered well before the verification's own
// bound (txn.VerifyTimeout, 5 s), which it used to wait out.
func TestTxnVerifyCoordinatorKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	const topic, txnID = "verified", "verified-writer"
	x := openTxnElsewhere(ctx, t, topic, txnID)
	raw, admin, coordinator, leader, p, pid, epoch := x.raw, x.admin, x.coordinator, x.leader, x.p, x.pid, x.epoch
	md, err := admin.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	req := txnProduceRequest(txnID, pid, epoch, topic, p, 0)
	req.Topics[0].TopicID = md.Topics[topic].ID
	req.Acks = 1 // the answer waits for the verification, not for the followers, one of which is killed

	x.nodes[coordinator-1].kill()
	start := time.Now()
	resp, err := raw.Broker(int(leader)).Request(ctx, req)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("produce to node %d after the coordinator was killed: %v", leader, err)
	}
	code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	t.Logf("node %d answered %v %v after coordinator %d was killed", leader, kerr.ErrorForCode(code), took.Round(time.Millisecond), coordinator)
	if took > 4*time.Second {
		t.Fatalf("the batch was answered after %v: the leader waited on the dead coordinator", took)
	}
	if code != 0 && !kerr.IsRetriable(kerr.ErrorForCode(code)) {
		t.Fatalf("the batch was refused %v", kerr.ErrorForCode(code))
	}
	if code != 0 { // the new coordinator was still loading: the producer retries
		if code = produceToLeader(ctx, t, raw, admin, topic, p, txnProduceRequest(txnID, pid, epoch, topic, p, 0)); code != 0 {
			t.Fatalf("the batch, retried: %v", kerr.ErrorForCode(code))
		}
	}
}

// TestTxnMarkersLeaderKilled: a partition's leader is killed (SIGKILL)
// just as the transaction that wrote to it commits. The coordinator, on
// another node, forwards the partition's marker to the dead leader; it
// gives it up as soon as the partition's election starts and has the new
// leader write it, so the producer's next transaction is taken in about
// a second, where it waited for the forward's 10 s bound and the
// coordinator's next sweep.
func TestTxnMarkersLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	const topic, txnID = "marked", "marked-writer"
	x := openTxnElsewhere(ctx, t, topic, txnID)
	raw, admin, coordinator, leader, p, pid, epoch := x.raw, x.admin, x.coordinator, x.leader, x.p, x.pid, x.epoch
	if code := produceToLeader(ctx, t, raw, admin, topic, p, txnProduceRequest(txnID, pid, epoch, topic, p, 0)); code != 0 {
		t.Fatalf("the transaction's batch: %v", kerr.ErrorForCode(code))
	}

	x.nodes[leader-1].kill()
	start := time.Now()
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, pid, epoch, true
	retryTxnCall(ctx, t, "EndTxn", func() (int16, error) {
		resp, err := end.RequestWith(ctx, raw)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
	addTxnPartition(ctx, t, raw, txnID, pid, epoch, topic, p) // waits out the markers of the first
	took := time.Since(start)
	t.Logf("the next transaction was taken %v after node %d, the leader of %s-%d, was killed (coordinator: node %d)",
		took.Round(time.Millisecond), leader, topic, p, coordinator)
	if took > 6*time.Second {
		t.Fatalf("the next transaction waited %v for the marker forwarded to the dead leader", took)
	}
}

// txnElsewhere is a transaction open on three processes, which added
// partition p of topic, led by another node than the id's coordinator.
type txnElsewhere struct {
	nodes               []*node
	admin               *kadm.Client
	raw                 *kgo.Client // for kmsg requests
	coordinator, leader int32
	p                   int32
	pid                 int64
	epoch               int16
}

// openTxnElsewhere starts three processes, creates topic (RF3, three
// partitions), initialises transactional id id and opens a transaction
// of it on a partition led by another node than its coordinator.
func openTxnElsewhere(ctx context.Context, t *testing.T, topic, id string) *txnElsewhere {
	t.Helper()
	nodes := startCluster(t, 3)
	logsOnFailure(t, nodes)
	seeds := seedsOf(nodes)
	x := &txnElsewhere{nodes: nodes, admin: newAdmin(t, seeds)}
	createTopicN(ctx, t, x.admin, topic, 3)
	electPreferredLeaders(ctx, t, x.admin, nodes, topic, 3)
	raw, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	x.raw = raw
	x.coordinator = txnCoordinator(ctx, t, x.admin, id, -1)
	x.pid, x.epoch = initTxnProducer(ctx, t, raw, id)
	x.p, x.leader = partitionLedElsewhere(ctx, t, x.admin, topic, x.coordinator)
	addTxnPartition(ctx, t, raw, id, x.pid, x.epoch, topic, x.p)
	return x
}

// initTxnProducer initialises transactional id id with raw (kmsg) and
// returns its producer id and epoch.
func initTxnProducer(ctx context.Context, t *testing.T, raw *kgo.Client, id string) (pid int64, epoch int16) {
	t.Helper()
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr(id), 30000
	retryTxnCall(ctx, t, "InitProducerId", func() (int16, error) {
		resp, err := init.RequestWith(ctx, raw)
		if err != nil {
			return 0, err
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return resp.ErrorCode, nil
	})
	return pid, epoch
}

// addTxnPartition adds partition p of topic to id's open transaction
// (AddPartitionsToTxn v3, as a client sends it).
func addTxnPartition(ctx context.Context, t *testing.T, raw *kgo.Client, id string, pid int64, epoch int16, topic string, p int32) {
	t.Helper()
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 3
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, []int32{p}
	add.Topics = append(add.Topics, at)
	retryTxnCall(ctx, t, "AddPartitionsToTxn", func() (int16, error) {
		resp, err := add.RequestWith(ctx, raw)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("%v: %+v", err, resp)
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	})
}

// txnProduceRequest is one transactional batch of id's producer (pid,
// epoch; sequence seq) for partition p of topic, acks=all.
func txnProduceRequest(id string, pid int64, epoch int16, topic string, p int32, seq int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = kmsg.StringPtr(id), -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, txnRecordBatch([]byte(id), pid, epoch, seq)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// countMissing counts the values of want not in got.
func countMissing(got, want map[string]bool) int {
	n := 0
	for v := range want {
		if !got[v] {
			n++
		}
	}
	return n
}

// electPreferredLeaders moves the leadership of every partition of topic
// to its preferred replica (ElectLeaders), and waits until every node of
// nodes, and admin's cached metadata (kadm keeps it up to 5 s), name
// those leaders: a view that still named the one before would have the
// test kill or ask the wrong node. A new topic's
// partitions are led by whichever replica won its first election, so all
// of them may be led by one node (1 new three-node cluster in 12, for
// three partitions), and the balancer, which moves them back, looks only
// every 300 s; the preferred replicas are spread over the nodes, so then
// every node leads some partition.
func electPreferredLeaders(ctx context.Context, t *testing.T, admin *kadm.Client, nodes []*node, topic string, partitions int32) {
	t.Helper()
	set := kadm.TopicsSet{topic: {}}
	for p := range partitions {
		set[topic][p] = struct{}{}
	}
	for {
		res, err := admin.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err == nil && len(res[topic]) != int(partitions) {
			err = fmt.Errorf("answers for %d of %d partitions", len(res[topic]), partitions)
		}
		if err == nil {
			for _, r := range res[topic] {
				if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
					err = fmt.Errorf("%s-%d: %w", topic, r.Partition, r.Err)
				}
			}
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("electing the preferred leaders of %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seedsOf(nodes)...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, nd := range nodes {
		awaitMetadata(ctx, t, cl, int32(nd.id), topic, func(md *kmsg.MetadataResponse) error {
			for _, p := range md.Topics[0].Partitions {
				if len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
					return fmt.Errorf("%s-%d is led by %d, not by its preferred replica (of %v)", topic, p.Partition, p.Leader, p.Replicas)
				}
			}
			return nil
		})
	}
	for {
		md, err := admin.Metadata(ctx, topic)
		if err == nil && !slices.ContainsFunc(md.Topics[topic].Partitions.Sorted(), func(p kadm.PartitionDetail) bool {
			return len(p.Replicas) == 0 || p.Leader != p.Replicas[0]
		}) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the admin client's metadata of %s never named the preferred leaders: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// partitionLedElsewhere waits until some partition of topic has a leader
// other than node not, and returns it and its leader.
func partitionLedElsewhere(ctx context.Context, t *testing.T, admin *kadm.Client, topic string, not int32) (int32, int32) {
	t.Helper()
	for {
		md, err := admin.Metadata(ctx, topic)
		if err == nil {
			for _, p := range md.Topics[topic].Partitions.Sorted() {
				if p.Err == nil && p.Leader >= 0 && p.Leader != not {
					return p.Partition, p.Leader
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no partition of %s led by a node other than %d: %v", topic, not, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// retryTxnCall runs call until it answers no error code, retrying while
// the answer is retriable (the coordinator is being elected or loading).
func retryTxnCall(ctx context.Context, t *testing.T, what string, call func() (int16, error)) {
	t.Helper()
	for {
		code, err := call()
		if err == nil && code == 0 {
			return
		}
		if err == nil && !kerr.IsRetriable(kerr.ErrorForCode(code)) && code != kerr.ConcurrentTransactions.Code {
			t.Fatalf("%s: %v", what, kerr.ErrorForCode(code))
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: %v %v", what, err, kerr.ErrorForCode(code))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produceToLeader sends req (one batch for partition p of topic) to the
// partition's leader, again while the answer is retriable (the leader
// moved), and returns the partition's error code.
func produceToLeader(ctx context.Context, t *testing.T, cl *kgo.Client, admin *kadm.Client, topic string, p int32, req *kmsg.ProduceRequest) int16 {
	t.Helper()
	for {
		var code int16 = -1
		md, err := admin.Metadata(ctx, topic)
		if err == nil {
			req.Topics[0].TopicID = md.Topics[topic].ID // v13 names topics by id
			var resp kmsg.Response
			resp, err = cl.Broker(int(md.Topics[topic].Partitions[p].Leader)).Request(ctx, req)
			if err == nil {
				code = resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
			}
		}
		if err == nil && !kerr.IsRetriable(kerr.ErrorForCode(code)) {
			return code
		}
		if ctx.Err() != nil {
			t.Fatalf("produce to %s-%d: %v %v", topic, p, err, kerr.ErrorForCode(code))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitStable waits until partition p of topic has no transaction open:
// its last stable offset is its high watermark.
func awaitStable(ctx context.Context, t *testing.T, admin *kadm.Client, topic string, p int32) {
	t.Helper()
	for {
		stable, err1 := admin.ListCommittedOffsets(ctx, topic)
		end, err2 := admin.ListEndOffsets(ctx, topic)
		s, ok1 := stable.Lookup(topic, p)
		e, ok2 := end.Lookup(topic, p)
		if err1 == nil && err2 == nil && ok1 && ok2 && s.Err == nil && e.Err == nil && s.Offset == e.Offset {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s-%d: the aborted transaction is still open: %+v %+v", topic, p, s, e)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// txnRecordBatch is a transactional record batch (magic 2) of one record
// of producer pid at epoch, with base sequence seq.
func txnRecordBatch(value []byte, pid int64, epoch int16, seq int32) []byte {
	r := kmsg.Record{Value: value}
	r.Length = int32(len(r.AppendTo(nil)) - 1) // the bytes after the one-byte length
	records := r.AppendTo(nil)
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{
		Length:         int32(49 + len(records)), // the batch header after Length, then the records
		Magic:          2,
		Attributes:     0x10, // transactional
		FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: 1,
		Records:    records,
	}
	b := rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}
