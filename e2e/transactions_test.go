package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// txnProducer is a franz-go transactional producer with idempotence on.
func txnProducer(t *testing.T, n *node.Node, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(n.KafkaAddr()),
		kgo.TransactionalID(id),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RetryTimeout(10 * time.Second),
	}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceInTxn writes values to topic in one transaction, ending it with
// commit or abort.
func produceInTxn(t *testing.T, cl *kgo.Client, topic string, commit bool, values ...string) {
	t.Helper()
	ctx := testContext(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("BeginTransaction: %v", err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce in transaction: %v", err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("EndTransaction(commit=%v): %v", commit, err)
	}
}

// consumeUntilQuiet reads topic from the start with the given isolation
// level until the end offsets are passed and returns the values.
func consumeAll(t *testing.T, n *node.Node, topic string, committed bool) []string {
	t.Helper()
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl := newFranz(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(200*time.Millisecond))
	var out []string
	ctx, cancel := context.WithTimeout(testContext(t), 3*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch error on %s[%d]: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// TestTransactionsAbortAndCommit is the classic demonstration: 10 records
// in an aborted transaction, 10 in a committed one; read_committed sees
// the 10 committed, read_uncommitted all 20.
func TestTransactionsAbortAndCommit(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "txn", 1, nil)
	cl := txnProducer(t, n, "classic")
	produceInTxn(t, cl, "txn", false, values("aborted", 10)...)
	produceInTxn(t, cl, "txn", true, values("committed", 10)...)

	got := consumeAll(t, n, "txn", true)
	if len(got) != 10 {
		t.Fatalf("read_committed saw %d records %v, want the 10 committed", len(got), got)
	}
	for i, v := range got {
		if want := fmt.Sprintf("committed-%d", i); v != want {
			t.Fatalf("read_committed record %d = %q, want %q", i, v, want)
		}
	}
	if got := consumeAll(t, n, "txn", false); len(got) != 20 {
		t.Fatalf("read_uncommitted saw %d records, want 20", len(got))
	}
	// 20 records and 2 markers.
	if end := endOffsets(t, adm, "txn")[0]; end != 22 {
		t.Fatalf("end offset %d, want 22 (20 records, 2 markers)", end)
	}

	// Tools see the transactional id. EndTxn answers once the decision
	// is durable; CompleteCommit follows the markers.
	waitTxnState(t, adm, "classic", "CompleteCommit")
	listed, err := adm.ListTransactions(testContext(t), nil, nil)
	if err != nil || len(listed) != 1 {
		t.Fatalf("ListTransactions = %v, %v; want the one id", listed, err)
	}
}

// TestTransactionsOpenBlocksReadCommitted: while a transaction is open, a
// read_committed consumer stops at its first offset (the last stable
// offset) and ListOffsets(read_committed) says so too.
func TestTransactionsOpenBlocksReadCommitted(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "open", 1, nil)
	plain := newFranz(t, n)
	produceSync(t, plain, &kgo.Record{Topic: "open", Value: []byte("before")})
	cl := txnProducer(t, n, "opener")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: "open", Value: []byte("inside")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, plain, &kgo.Record{Topic: "open", Value: []byte("after")})

	if got := consumeAll(t, n, "open", true); len(got) != 1 || got[0] != "before" {
		t.Fatalf("read_committed during the transaction saw %v, want [before]", got)
	}
	lso := listOffsetsCommitted(t, n, "open")
	if lso != 1 {
		t.Fatalf("ListOffsets(latest, read_committed) = %d, want 1", lso)
	}
	if err := cl.EndTransaction(testContext(t), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := consumeAll(t, n, "open", true); len(got) != 3 {
		t.Fatalf("read_committed after commit saw %v, want 3 records", got)
	}
}

func listOffsetsCommitted(t *testing.T, n *node.Node, topic string) int64 {
	t.Helper()
	cl := newFranz(t, n)
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

// TestTransactionsZombieFenced: a second producer with the same
// transactional id fences the first; the first cannot commit, and its open
// transaction is aborted.
func TestTransactionsZombieFenced(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "zombie", 1, nil)
	old := txnProducer(t, n, "shared")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(testContext(t), &kgo.Record{Topic: "zombie", Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := txnProducer(t, n, "shared")
	produceInTxn(t, fresh, "zombie", true, "fresh")

	err := old.EndTransaction(testContext(t), kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("zombie commit: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	if got := consumeAll(t, n, "zombie", true); len(got) != 1 || got[0] != "fresh" {
		t.Fatalf("read_committed saw %v, want only [fresh]", got)
	}
}

// TestTransactionsTimeoutAborts: a transaction left open past its timeout
// is aborted by the broker and its producer fenced.
func TestTransactionsTimeoutAborts(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "timeout", 1, nil)
	cl := txnProducer(t, n, "slow", kgo.TransactionTimeout(time.Second))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: "timeout", Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, adm, "slow", "CompleteAbort")
	if err := cl.EndTransaction(testContext(t), kgo.TryCommit); err == nil {
		t.Fatal("commit after the broker aborted the transaction succeeded")
	}
	if got := consumeAll(t, n, "timeout", true); len(got) != 0 {
		t.Fatalf("read_committed saw %v after the timeout abort", got)
	}
}

func waitTxnState(t *testing.T, adm *kadm.Client, id, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := adm.DescribeTransactions(testContext(t), id)
		if err == nil && d[id].State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction %q never reached %s: %+v %v", id, state, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTransactionsSurviveRestart: committed data stays visible to
// read_committed after a restart, and a transaction open at the restart
// is finished by its producer's successor (fenced and aborted).
func TestTransactionsSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startNode(t, nodetest.WithDataDir(dir))
	createTopic(t, newAdmin(t, first), "durable-txn", 1, nil)
	cl := txnProducer(t, first, "restart")
	produceInTxn(t, cl, "durable-txn", true, values("committed", 5)...)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: "durable-txn", Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}

	second := startNode(t, nodetest.WithDataDir(dir))
	if got := consumeAll(t, second, "durable-txn", true); len(got) != 5 {
		t.Fatalf("read_committed after restart saw %v, want the 5 committed", got)
	}
	next := txnProducer(t, second, "restart")
	produceInTxn(t, next, "durable-txn", true, "after")
	got := consumeAll(t, second, "durable-txn", true)
	if len(got) != 6 || got[5] != "after" {
		t.Fatalf("read_committed saw %v, want 5 committed and [after]", got)
	}
	if all := consumeAll(t, second, "durable-txn", false); len(all) != 7 {
		t.Fatalf("read_uncommitted saw %d, want 7", len(all))
	}
}

// TestTransactionsConsumeTransformProduce: a GroupTransactSession copies
// an input topic to an output topic with its offsets committed in the
// transactions; each input record is in the output exactly once.
func TestTransactionsConsumeTransformProduce(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "ctp-in", 2, nil)
	createTopic(t, adm, "ctp-out", 1, nil)
	const total = 200
	in := newFranz(t, n)
	var recs []*kgo.Record
	for i := range total {
		recs = append(recs, &kgo.Record{Topic: "ctp-in", Value: fmt.Appendf(nil, "%d", i)})
	}
	produceSync(t, in, recs...)

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(n.KafkaAddr()),
		kgo.TransactionalID("ctp"),
		kgo.ConsumerGroup("ctp-group"),
		kgo.ConsumeTopics("ctp-in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic("ctp-out"),
		kgo.RequireStableFetchOffsets(),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx := testContext(t)
	copied := 0
	for copied < total {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("copied %d of %d before the deadline", copied, total)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("End: %v", err)
		}
		if committed {
			copied += len(fs.Records())
		}
	}
	out := consumeAll(t, n, "ctp-out", true)
	seen := map[string]int{}
	for _, v := range out {
		seen[v]++
	}
	if len(out) != total || len(seen) != total {
		t.Fatalf("output has %d records, %d distinct; want each of %d once", len(out), len(seen), total)
	}
	offs, err := adm.FetchOffsets(testContext(t), "ctp-group")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != total {
		t.Fatalf("committed offsets sum to %d, want %d", sum, total)
	}
}
