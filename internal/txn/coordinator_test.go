package txn

import (
	"errors"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/record"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// fakeGroups records the transaction outcomes the coordinator reports for
// __consumer_offsets; every group is on partition 0, and available unless
// it is named down.
type fakeGroups struct {
	mu        sync.Mutex
	completed []completion
	down      string
}

type completion struct {
	partition  int32
	producerID int64
	commit     bool
}

func (g *fakeGroups) PartitionFor(string) int32 { return 0 }

func (g *fakeGroups) Writable(group string) error {
	if group == g.down {
		return errors.New("its partition is offline")
	}
	return nil
}

// marker is the broker's marker hook, as the node installs the group
// coordinator's CompleteTxn.
func (g *fakeGroups) marker(topic string, partition int32, producerID int64, commit bool) {
	if topic != offsetsTopic {
		return
	}
	g.mu.Lock()
	g.completed = append(g.completed, completion{partition, producerID, commit})
	g.mu.Unlock()
}

func (g *fakeGroups) outcomes() []completion {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]completion(nil), g.completed...)
}

// env is a broker with topic "t" (2 partitions) and __consumer_offsets,
// and a coordinator on it with a fake clock and no timer of its own
// firing during a test (sweeps are called by hand).
type env struct {
	t      *testing.T
	dir    string
	b      *broker.Broker
	c      *Coordinator
	clock  *fakeClock
	groups *fakeGroups
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), clock: &fakeClock{now: time.UnixMilli(1_700_000_000_000)}, groups: &fakeGroups{}}
	e.openBroker()
	if _, err := e.b.CreateTopic(broker.TopicSpec{Name: "t", Partitions: 2}, false); err != nil {
		t.Fatalf("create t: %v", err)
	}
	if _, err := e.b.CreateInternalTopic(broker.TopicSpec{Name: offsetsTopic, Partitions: 1}); err != nil {
		t.Fatalf("create %s: %v", offsetsTopic, err)
	}
	e.openCoordinator()
	t.Cleanup(e.close)
	return e
}

func (e *env) openBroker() {
	e.t.Helper()
	b, err := broker.Open(broker.Config{DataDir: e.dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		e.t.Fatalf("open broker: %v", err)
	}
	b.OnTxnMarker(e.groups.marker)
	e.b = b
}

func (e *env) openCoordinator() {
	e.t.Helper()
	c, err := Open(Config{
		Broker: e.b, Groups: e.groups, Logger: slog.New(slog.DiscardHandler),
		CheckInterval: time.Hour, Now: e.clock.Now,
	})
	if err != nil {
		e.t.Fatalf("open coordinator: %v", err)
	}
	e.c = c
}

func (e *env) close() {
	if e.c != nil {
		e.c.Close()
		e.c = nil
	}
	if e.b != nil {
		if err := e.b.Close(); err != nil {
			e.t.Errorf("close broker: %v", err)
		}
		e.b = nil
	}
}

// restart closes the coordinator and the broker and opens both again on
// the same data directory.
func (e *env) restart() {
	e.t.Helper()
	e.close()
	e.openBroker()
	e.openCoordinator()
}

func (e *env) partition(topic string, idx int32) *broker.Partition {
	e.t.Helper()
	tp, err := e.b.Topic(topic)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := tp.Partition(idx)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// writeTxnData appends a transactional batch of the producer to t-idx.
func (e *env) writeTxnData(pid int64, epoch int16, idx int32) {
	e.t.Helper()
	if err := e.partition("t", idx).AppendTxnRecords(pid, epoch, []record.Record{{Value: []byte("v")}}); err != nil {
		e.t.Fatalf("transactional append: %v", err)
	}
}

func (e *env) init(id string, timeout time.Duration) InitResult {
	e.t.Helper()
	r, err := e.c.InitProducerID(id, timeout, -1, -1)
	if err != nil {
		e.t.Fatalf("InitProducerID(%s): %v", id, err)
	}
	return r
}

func (e *env) add(id string, r InitResult, parts ...int32) {
	e.t.Helper()
	var tps []TopicPartition
	for _, p := range parts {
		tps = append(tps, TopicPartition{"t", p})
	}
	results, err := e.c.AddPartitions(id, r.ProducerID, r.Epoch, tps)
	if err != nil {
		e.t.Fatalf("AddPartitions: %v", err)
	}
	for i, err := range results {
		if err != nil {
			e.t.Fatalf("AddPartitions %v: %v", tps[i], err)
		}
	}
}

// describe describes the id once the completion of its last transaction
// (which EndTxn leaves running) is over.
func (e *env) describe(id string) *Description {
	e.t.Helper()
	e.settle(id)
	return e.c.Describe([]string{id})[0]
}

// settle waits for the completion of the id's last transaction, if one
// is running.
func (e *env) settle(id string) {
	if t := e.c.lookup(id); t != nil {
		t.mu.Lock()
		done := t.completing
		t.mu.Unlock()
		if done != nil {
			<-done
		}
	}
}

func (e *env) wantState(id, state string) *Description {
	e.t.Helper()
	d := e.describe(id)
	if d == nil {
		e.t.Fatalf("%s: not described, want state %s", id, state)
	}
	if d.State != state {
		e.t.Fatalf("%s: state %s, want %s", id, d.State, state)
	}
	return d
}

func TestStateMachine(t *testing.T) {
	e := newEnv(t)
	if _, err := e.b.Topic(StateTopic); err == nil {
		t.Fatalf("%s exists before the first transactional producer", StateTopic)
	}
	if _, err := e.c.InitProducerID("a", 0, -1, -1); !errors.Is(err, ErrInvalidTransactionTimeout) {
		t.Fatalf("timeout 0: %v, want ErrInvalidTransactionTimeout", err)
	}
	if _, err := e.c.InitProducerID("a", DefaultMaxTimeout+time.Second, -1, -1); !errors.Is(err, ErrInvalidTransactionTimeout) {
		t.Fatalf("timeout past the maximum: %v, want ErrInvalidTransactionTimeout", err)
	}
	r := e.init("a", time.Minute)
	if r.Epoch != 0 {
		t.Fatalf("first epoch %d, want 0", r.Epoch)
	}
	if _, err := e.b.Topic(StateTopic); err != nil {
		t.Fatalf("%s after InitProducerId: %v", StateTopic, err)
	}
	e.wantState("a", "Empty")
	if err := e.c.EndTxn("a", r.ProducerID, r.Epoch, true); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("EndTxn with no transaction: %v, want ErrInvalidTxnState", err)
	}

	// A bad partition: none is added.
	results, err := e.c.AddPartitions("a", r.ProducerID, r.Epoch, []TopicPartition{{"t", 0}, {"t", 9}})
	if err != nil || results[0] != nil || !errors.Is(results[1], ErrUnknownTopicOrPartition) {
		t.Fatalf("AddPartitions with t-9: %v %v", results, err)
	}
	e.wantState("a", "Empty")

	// A group whose partition of __consumer_offsets is unavailable: its
	// marker could not be written, so it does not join.
	e.groups.down = "down"
	if err := e.c.AddOffsets("a", r.ProducerID, r.Epoch, "down"); !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Fatalf("AddOffsets of an unavailable group: %v, want ErrCoordinatorNotAvailable", err)
	}
	e.wantState("a", "Empty")

	// Commit: a marker on every partition, the transaction complete.
	e.add("a", r, 0, 1)
	if err := e.c.AddOffsets("a", r.ProducerID, r.Epoch, "g"); err != nil {
		t.Fatalf("AddOffsets: %v", err)
	}
	d := e.wantState("a", "Ongoing")
	if len(d.Partitions["t"]) != 2 || len(d.Partitions[offsetsTopic]) != 1 || d.Started.IsZero() {
		t.Fatalf("ongoing transaction: %+v", d)
	}
	e.writeTxnData(r.ProducerID, r.Epoch, 0)
	before := e.partition("t", 1).EndOffset()
	if err := e.c.EndTxn("a", r.ProducerID, r.Epoch, true); err != nil {
		t.Fatalf("EndTxn commit: %v", err)
	}
	d = e.wantState("a", "CompleteCommit")
	if len(d.Partitions) != 0 || !d.Started.IsZero() {
		t.Fatalf("completed transaction still lists partitions: %+v", d)
	}
	if got := e.partition("t", 1).EndOffset(); got != before+1 {
		t.Fatalf("t-1 end offset %d after commit, want %d (one marker)", got, before+1)
	}
	if p := e.partition("t", 0); p.OngoingTxnProducers() != 0 || len(p.AbortedTxns(0, math.MaxInt64)) != 0 {
		t.Fatalf("t-0 after commit: %d ongoing, aborted %v", p.OngoingTxnProducers(), p.AbortedTxns(0, math.MaxInt64))
	}
	if got := e.groups.outcomes(); len(got) != 1 || got[0] != (completion{0, r.ProducerID, true}) {
		t.Fatalf("group outcomes %v, want one commit of producer %d", got, r.ProducerID)
	}
	// A retried EndTxn with the same outcome succeeds; the other fails.
	if err := e.c.EndTxn("a", r.ProducerID, r.Epoch, true); err != nil {
		t.Fatalf("retried commit: %v", err)
	}
	if err := e.c.EndTxn("a", r.ProducerID, r.Epoch, false); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("abort after commit: %v, want ErrInvalidTxnState", err)
	}

	// Abort: the data of the transaction is listed as aborted.
	e.add("a", r, 0)
	e.writeTxnData(r.ProducerID, r.Epoch, 0)
	if err := e.c.EndTxn("a", r.ProducerID, r.Epoch, false); err != nil {
		t.Fatalf("EndTxn abort: %v", err)
	}
	e.wantState("a", "CompleteAbort")
	if got := e.partition("t", 0).AbortedTxns(0, math.MaxInt64); len(got) != 1 || got[0].ProducerID != r.ProducerID {
		t.Fatalf("t-0 aborted transactions %v, want one of producer %d", got, r.ProducerID)
	}
	if got := e.c.List(); len(got) != 1 || got[0].TransactionalID != "a" {
		t.Fatalf("List: %+v", got)
	}
}

func TestFencing(t *testing.T) {
	e := newEnv(t)
	old := e.init("a", time.Minute)
	e.add("a", old, 0)
	e.writeTxnData(old.ProducerID, old.Epoch, 0)

	// A new producer of the id: same producer id, next epoch, and the
	// old producer's open transaction is aborted.
	cur := e.init("a", time.Minute)
	if cur.ProducerID != old.ProducerID || cur.Epoch != old.Epoch+1 {
		t.Fatalf("second InitProducerID %+v after %+v, want the next epoch", cur, old)
	}
	e.wantState("a", "Empty")
	p := e.partition("t", 0)
	if p.OngoingTxnProducers() != 0 || len(p.AbortedTxns(0, math.MaxInt64)) != 1 {
		t.Fatalf("the fenced producer's transaction: %d ongoing, aborted %v; want it aborted", p.OngoingTxnProducers(), p.AbortedTxns(0, math.MaxInt64))
	}

	// The zombie can do nothing more, here or on the partition.
	if _, err := e.c.AddPartitions("a", old.ProducerID, old.Epoch, []TopicPartition{{"t", 1}}); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("AddPartitions of the old epoch: %v, want ErrProducerFenced", err)
	}
	if err := e.c.EndTxn("a", old.ProducerID, old.Epoch, true); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("EndTxn of the old epoch: %v, want ErrProducerFenced", err)
	}
	if err := e.c.AddOffsets("a", old.ProducerID, old.Epoch, "g"); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("AddOffsets of the old epoch: %v, want ErrProducerFenced", err)
	}
	if err := p.AppendTxnRecords(old.ProducerID, old.Epoch, []record.Record{{Value: []byte("z")}}); !errors.Is(err, broker.ErrInvalidProducerEpoch) {
		t.Fatalf("partition append of the old epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	if err := e.c.EndTxn("a", cur.ProducerID, cur.Epoch+1, true); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("EndTxn of a future epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	if err := e.c.EndTxn("a", cur.ProducerID+1, cur.Epoch, true); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("EndTxn of another producer id: %v, want ErrInvalidProducerIDMapping", err)
	}
	if err := e.c.EndTxn("nobody", cur.ProducerID, cur.Epoch, true); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("EndTxn of an unknown id: %v, want ErrInvalidProducerIDMapping", err)
	}

	// KIP-360 re-initialisation: the current id and epoch move on; a
	// stale one is fenced.
	next, err := e.c.InitProducerID("a", time.Minute, cur.ProducerID, cur.Epoch)
	if err != nil || next.ProducerID != cur.ProducerID || next.Epoch != cur.Epoch+1 {
		t.Fatalf("re-initialisation: %+v %v", next, err)
	}
	if _, err := e.c.InitProducerID("a", time.Minute, cur.ProducerID, cur.Epoch); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("re-initialisation with a stale epoch: %v, want ErrProducerFenced", err)
	}
}

func TestEpochExhaustionTakesANewProducerID(t *testing.T) {
	e := newEnv(t)
	r := e.init("a", time.Minute)
	tx := e.c.lookup("a")
	tx.mu.Lock()
	tx.epoch = math.MaxInt16 - 1
	tx.mu.Unlock()
	next := e.init("a", time.Minute)
	if next.ProducerID == r.ProducerID || next.Epoch != 0 {
		t.Fatalf("after the last epoch: %+v, want a new producer id at epoch 0", next)
	}
}

func TestTimeoutAbortsAndFences(t *testing.T) {
	e := newEnv(t)
	r := e.init("a", 10*time.Second)
	e.add("a", r, 0)
	e.writeTxnData(r.ProducerID, r.Epoch, 0)

	e.c.sweep(e.clock.add(9 * time.Second))
	e.wantState("a", "Ongoing")

	e.c.sweep(e.clock.add(2 * time.Second))
	d := e.wantState("a", "CompleteAbort")
	if d.ProducerEpoch != r.Epoch+1 {
		t.Fatalf("epoch after the timeout abort %d, want %d (bumped to fence the producer)", d.ProducerEpoch, r.Epoch+1)
	}
	if got := e.partition("t", 0).AbortedTxns(0, math.MaxInt64); len(got) != 1 {
		t.Fatalf("aborted transactions on t-0: %v, want 1", got)
	}
	if err := e.c.EndTxn("a", r.ProducerID, r.Epoch, true); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("commit after the timeout abort: %v, want ErrProducerFenced", err)
	}
	// The producer starts over with InitProducerId.
	if next := e.init("a", 10*time.Second); next.Epoch != r.Epoch+2 {
		t.Fatalf("InitProducerID after the timeout: epoch %d, want %d", next.Epoch, r.Epoch+2)
	}
}

// TestRestartFinishesDecidedTransactions: a transaction whose decision
// (PrepareCommit or PrepareAbort) was written but whose markers were not,
// as when the broker dies between the two, is finished when the broker and
// the coordinator start again. An open transaction stays open and times out.
func TestRestartFinishesDecidedTransactions(t *testing.T) {
	e := newEnv(t)
	committing := e.init("committing", time.Minute)
	aborting := e.init("aborting", time.Minute)
	open := e.init("open", 30*time.Second)
	for _, tx := range []struct {
		id string
		r  InitResult
	}{{"committing", committing}, {"aborting", aborting}, {"open", open}} {
		e.add(tx.id, tx.r, 0, 1)
		if tx.id != "open" {
			if err := e.c.AddOffsets(tx.id, tx.r.ProducerID, tx.r.Epoch, "g"); err != nil {
				t.Fatal(err)
			}
		}
		e.writeTxnData(tx.r.ProducerID, tx.r.Epoch, 0)
		e.writeTxnData(tx.r.ProducerID, tx.r.Epoch, 1)
	}
	// The decision is durable, the markers are not written: the state
	// EndTxn leaves when the process dies after its first write.
	decide := func(id string, commit bool) {
		tx := e.c.lookup(id)
		tx.mu.Lock()
		defer tx.mu.Unlock()
		tx.state = kmsg.TransactionStatePrepareCommit
		if !commit {
			tx.state = kmsg.TransactionStatePrepareAbort
		}
		if err := e.c.write(tx); err != nil {
			t.Fatal(err)
		}
	}
	decide("committing", true)
	decide("aborting", false)
	if n := e.partition("t", 0).OngoingTxnProducers(); n != 3 {
		t.Fatalf("%d transactions open on t-0 before the restart, want 3", n)
	}

	e.restart()
	e.wantState("committing", "CompleteCommit")
	e.wantState("aborting", "CompleteAbort")
	d := e.wantState("open", "Ongoing")
	if len(d.Partitions["t"]) != 2 {
		t.Fatalf("the open transaction's partitions after restart: %v", d.Partitions)
	}
	for idx := int32(0); idx < 2; idx++ {
		p := e.partition("t", idx)
		aborted := p.AbortedTxns(0, math.MaxInt64)
		if p.OngoingTxnProducers() != 1 || len(aborted) != 1 || aborted[0].ProducerID != aborting.ProducerID {
			t.Fatalf("t-%d after restart: %d open (want 1, the open one), aborted %v (want the aborting one)", idx, p.OngoingTxnProducers(), aborted)
		}
	}
	outcomes := map[int64]bool{}
	for _, o := range e.groups.outcomes() {
		outcomes[o.producerID] = o.commit
	}
	if c, ok := outcomes[committing.ProducerID]; !ok || !c {
		t.Errorf("group offsets of the committing transaction not committed: %v", outcomes)
	}
	if c, ok := outcomes[aborting.ProducerID]; !ok || c {
		t.Errorf("group offsets of the aborting transaction not aborted: %v", outcomes)
	}

	// The open one keeps its start time over the restart and times out.
	e.c.sweep(e.clock.add(31 * time.Second))
	e.wantState("open", "CompleteAbort")
	if n := e.partition("t", 0).OngoingTxnProducers(); n != 0 {
		t.Fatalf("%d transactions open on t-0 after the timeout, want 0", n)
	}
	// A second restart finds everything complete and writes nothing.
	before := e.partition("t", 0).EndOffset()
	e.restart()
	if got := e.partition("t", 0).EndOffset(); got != before {
		t.Fatalf("t-0 end offset %d after a restart with nothing to finish, want %d", got, before)
	}
}

func TestIdleIDsExpire(t *testing.T) {
	e := newEnv(t)
	old := e.init("idle", time.Minute)
	busy := e.init("busy", time.Minute)
	e.add("busy", busy, 0)

	e.c.sweep(e.clock.add(DefaultIDExpiration - time.Minute))
	e.wantState("idle", "Empty")
	// The busy one's transaction times out here; that is a state change,
	// so it is not idle afterwards.
	e.wantState("busy", "CompleteAbort")

	e.c.sweep(e.clock.add(2 * time.Minute))
	if d := e.describe("idle"); d != nil {
		t.Fatalf("idle id still there after the expiration: %+v", d)
	}
	e.wantState("busy", "CompleteAbort")
	if err := e.c.EndTxn("idle", old.ProducerID, old.Epoch, true); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("EndTxn of an expired id: %v, want ErrInvalidProducerIDMapping", err)
	}

	// The tombstone keeps it gone over a restart; a new producer of the
	// id starts afresh with a new producer id.
	e.restart()
	if d := e.describe("idle"); d != nil {
		t.Fatalf("expired id back after a restart: %+v", d)
	}
	e.wantState("busy", "CompleteAbort")
	if r := e.init("idle", time.Minute); r.ProducerID == old.ProducerID || r.Epoch != 0 {
		t.Fatalf("InitProducerID of an expired id: %+v, want a new producer id at epoch 0", r)
	}
}

func TestOngoingTransactionIsNeverIdle(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		state   kmsg.TransactionState
		expired bool
	}{{0, true}, {1, false}, {2, false}, {3, false}, {4, true}, {5, true}} {
		tx := &txn{state: tc.state, updated: now.Add(-2 * DefaultIDExpiration)}
		if got := tx.expired(now, DefaultIDExpiration); got != tc.expired {
			t.Errorf("state %s idle past the expiration: expired=%v, want %v", stateName(tc.state), got, tc.expired)
		}
	}
}
