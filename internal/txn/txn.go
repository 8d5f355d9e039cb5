package txn

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// txn is the coordinator's record of one transactional id: the producer
// id and epoch it holds, and its current transaction. mu serialises every
// operation on it, including the durable writes and marker writes an
// operation makes, so each transition is on disk before the next starts.
type txn struct {
	mu sync.Mutex

	id         string
	producerID int64
	epoch      int16
	timeout    time.Duration
	state      kmsg.TransactionState
	partitions map[string]map[int32]bool // in the current transaction
	started    time.Time                 // when the current transaction began (zero when none)
	updated    time.Time                 // the last state change written
	removed    bool                      // expired and gone from the coordinator's map

	// completing is non-nil while the markers of a decided transaction are
	// written in the background (Coordinator.completeAsync); it is closed
	// when that is over, whether or not every marker was written.
	completing chan struct{}
}

// awaitCompletion waits for the running completion of t, at most until
// deadline. t.mu must be held and t.completing set; awaitCompletion
// releases the lock (the completion needs it) and returns without it. It
// reports whether the completion finished in time.
func (t *txn) awaitCompletion(deadline time.Time) bool {
	done := t.completing
	t.mu.Unlock()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

// partitionList is the transaction's partitions, sorted.
func (t *txn) partitionList() []TopicPartition {
	var out []TopicPartition
	for _, topic := range slices.Sorted(maps.Keys(t.partitions)) {
		for _, p := range slices.Sorted(maps.Keys(t.partitions[topic])) {
			out = append(out, TopicPartition{topic, p})
		}
	}
	return out
}

func (t *txn) removePartition(topic string, p int32) {
	ps := t.partitions[topic]
	delete(ps, p)
	if len(ps) == 0 {
		delete(t.partitions, topic)
	}
}

// expired reports whether the id has been idle past expiration: no
// transaction open or completing, and no state change since.
func (t *txn) expired(now time.Time, expiration time.Duration) bool {
	switch t.state {
	case kmsg.TransactionStateOngoing, kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort:
		return false
	}
	return now.Sub(t.updated) > expiration
}

func (t *txn) addPartition(topic string, p int32) bool {
	if t.partitions == nil {
		t.partitions = map[string]map[int32]bool{}
	}
	ps := t.partitions[topic]
	if ps == nil {
		ps = map[int32]bool{}
		t.partitions[topic] = ps
	}
	if ps[p] {
		return false
	}
	ps[p] = true
	return true
}

// checkProducer verifies a request comes from the id's current producer.
func (t *txn) checkProducer(producerID int64, epoch int16) error {
	switch {
	case producerID != t.producerID:
		return fmt.Errorf("%w: transactional id %q has producer %d, not %d", ErrInvalidProducerIDMapping, t.id, t.producerID, producerID)
	case epoch < t.epoch:
		return fmt.Errorf("%w: transactional id %q is at epoch %d, the request has %d", ErrProducerFenced, t.id, t.epoch, epoch)
	case epoch > t.epoch:
		return fmt.Errorf("%w: transactional id %q is at epoch %d, the request has %d", ErrInvalidProducerEpoch, t.id, t.epoch, epoch)
	}
	return nil
}

// stateName is the state as DescribeTransactions and ListTransactions
// name it (Kafka's TransactionState names).
func stateName(s kmsg.TransactionState) string {
	switch s {
	case kmsg.TransactionStateEmpty:
		return "Empty"
	case kmsg.TransactionStateOngoing:
		return "Ongoing"
	case kmsg.TransactionStatePrepareCommit:
		return "PrepareCommit"
	case kmsg.TransactionStatePrepareAbort:
		return "PrepareAbort"
	case kmsg.TransactionStateCompleteCommit:
		return "CompleteCommit"
	case kmsg.TransactionStateCompleteAbort:
		return "CompleteAbort"
	case kmsg.TransactionStateDead:
		return "Dead"
	case kmsg.TransactionStatePrepareEpochFence:
		return "PrepareEpochFence"
	}
	return "Unknown"
}

// Description is one transactional id as DescribeTransactions shows it.
type Description struct {
	TransactionalID string
	State           string
	Timeout         time.Duration
	Started         time.Time // zero when no transaction is open
	ProducerID      int64
	ProducerEpoch   int16
	Partitions      map[string][]int32
}

func (t *txn) describe() Description {
	d := Description{
		TransactionalID: t.id, State: stateName(t.state), Timeout: t.timeout, Started: t.started,
		ProducerID: t.producerID, ProducerEpoch: t.epoch, Partitions: map[string][]int32{},
	}
	for topic, ps := range t.partitions {
		d.Partitions[topic] = slices.Sorted(maps.Keys(ps))
	}
	return d
}
