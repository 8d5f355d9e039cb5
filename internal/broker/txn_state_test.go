package broker

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// txnBatch is a transactional batch of one record of producer id at
// epoch 0 and sequence seq.
func txnBatch(id int64, seq int32) []byte {
	return idempotentBatchAt(id, 0, seq, 1, time.Now(), attrTransactional)
}

// TestMarkerBetweenVerificationAndAppend: a marker that ends the
// producer's transaction on the partition after its batch was verified
// and before it is appended makes the append fail ErrInvalidTxnState
// (KIP-890 part 1's race, closed as Kafka's VerificationGuard closes it),
// and no transaction is left open to hold the last stable offset back.
// Without the marker, and with a verification started after it, the
// batch goes in.
func TestMarkerBetweenVerificationAndAppend(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "txn"}, false)
	p, _ := tp.Partition(0)
	const pid = 9
	verify := func(seq int32) TxnGuard {
		t.Helper()
		g, err := p.StartTxnVerification(pid, seq)
		if err != nil {
			t.Fatalf("StartTxnVerification: %v", err)
		}
		return g
	}
	appendVerified := func(seq int32, g TxnGuard) error {
		t.Helper()
		res, err := p.AppendVerified(txnBatch(pid, seq), -1, g)
		if err == nil {
			err = res.Wait(t.Context())
		}
		return err
	}
	abort := func() {
		t.Helper()
		if err := p.WriteTxnMarker(pid, 0, false, 0); err != nil {
			t.Fatalf("marker: %v", err)
		}
	}
	wantNothingOpen := func(when string) {
		t.Helper()
		if n, lso, hw := p.OngoingTxnProducers(), p.LastStableOffset(), p.HighWatermark(); n != 0 || lso != hw {
			t.Fatalf("%s: %d transactions open, last stable offset %d, high watermark %d", when, n, lso, hw)
		}
	}

	// The producer's first batch of the transaction here: the marker of
	// its EndTxn lands between verification and append.
	g := verify(0)
	if g.TxnOpen() {
		t.Fatal("a guard taken with no transaction open says it is open")
	}
	abort()
	if err := appendVerified(0, g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("first batch appended after a marker that followed its verification: %v, want ErrInvalidTxnState", err)
	}
	wantNothingOpen("after the refused first batch")

	// A verification taken after the marker is not fooled by the stale
	// one (Kafka's ABA case): each guard is its own.
	stale := verify(0)
	abort()
	fresh := verify(0)
	if err := appendVerified(0, stale); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch with a guard from before the marker: %v, want ErrInvalidTxnState", err)
	}
	if err := appendVerified(0, fresh); err != nil {
		t.Fatalf("batch verified after the marker: %v", err)
	}

	// A later batch, verified while the transaction was open here, then
	// the marker: refused too.
	open := verify(1)
	if !open.TxnOpen() {
		t.Fatal("a guard taken with the transaction open says it is not")
	}
	abort()
	wantNothingOpen("after the marker")
	if err := appendVerified(1, open); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("later batch appended after a marker that followed its verification: %v, want ErrInvalidTxnState", err)
	}
	wantNothingOpen("after the refused later batch")

	// The next transaction's batches go in as verified.
	if err := appendVerified(1, verify(1)); err != nil {
		t.Fatalf("next transaction's first batch: %v", err)
	}
	if err := appendVerified(2, verify(2)); err != nil {
		t.Fatalf("next transaction's second batch: %v", err)
	}
	if p.OngoingTxnProducers() != 1 {
		t.Fatalf("%d transactions open, want the producer's", p.OngoingTxnProducers())
	}
}

// TestUnusedVerificationsExpire: a verification whose batch never came
// is forgotten as producers are, a day on.
func TestUnusedVerificationsExpire(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "txn"}, false)
	p, _ := tp.Partition(0)
	if _, err := p.StartTxnVerification(9, 0); err != nil {
		t.Fatal(err)
	}
	pending := func() int {
		p.txnMu.Lock()
		defer p.txnMu.Unlock()
		return len(p.txns.verifying)
	}
	if err := p.maintainProducers(time.Now()); err != nil || pending() != 1 {
		t.Fatalf("verification gone at once (%v)", err)
	}
	if err := p.maintainProducers(time.Now().Add(2 * defaultProducerIDExpirationMs * time.Millisecond)); err != nil || pending() != 0 {
		t.Fatalf("verification kept past the expiration (%v)", err)
	}
}

// TestNewLeaderRebuildsTxnsUnderReaders: a partition's new leader
// rebuilds its producers and transactions from its log at its first
// produce while read_committed fetches read the last stable offset: the
// rebuild swaps the table in under txnMu, which the readers take (run
// with -race; a map written while a reader iterates it can also crash
// the process outright). The open transaction holds the last stable
// offset back on the new leader too.
func TestNewLeaderRebuildsTxnsUnderReaders(t *testing.T) {
	c := newTestCluster(t, 3)
	deadLeaderTopic(t, c)
	produceToDeadLeader(c, idempotentBatch(3, 0, 0, 1))
	leader := produceToDeadLeader(c, txnBatch(7, 0))
	isolateDeadLeader(c, leader)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, id := range c.ids {
		if id != leader {
			p := deadPartition(c, id)
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						p.LastStableOffset()
					}
				}
			})
		}
	}
	next := deadPartition(c, produceToDeadLeader(c, idempotentBatch(4, 0, 0, 1), leader)) // rebuilds its table
	close(stop)
	wg.Wait()
	if lso := next.LastStableOffset(); lso != 1 {
		t.Errorf("last stable offset on the new leader %d, want 1 (the open transaction's first batch)", lso)
	}
}

// TestVerifiedBatchesGoInInOrder: of a producer's transactional batches
// verified together on a partition that does not know the producer
// (which takes its batch at any sequence), a later one that comes first,
// its predecessor having failed on the way, is refused
// OUT_OF_ORDER_SEQUENCE_NUMBER (Kafka's VerificationStateEntry lowest
// sequence), so that the producer's retries go in in order; the first
// one, then the later one, go in.
func TestVerifiedBatchesGoInInOrder(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "txn"}, false)
	p, _ := tp.Partition(0)
	const pid = 11
	guards := make([]TxnGuard, 2)
	for seq := range guards {
		g, err := p.StartTxnVerification(pid, int32(seq))
		if err != nil {
			t.Fatal(err)
		}
		guards[seq] = g
	}
	if _, err := p.AppendVerified(txnBatch(pid, 1), -1, guards[1]); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("the second batch before the first: %v, want ErrOutOfOrderSequence", err)
	}
	for seq, g := range guards {
		if _, err := p.AppendVerified(txnBatch(pid, int32(seq)), -1, g); err != nil {
			t.Fatalf("batch %d, in order: %v", seq, err)
		}
	}
	if end := p.EndOffset(); end != 2 {
		t.Fatalf("log ends at %d, want 2", end)
	}
}
