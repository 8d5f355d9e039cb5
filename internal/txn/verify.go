package txn

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce verification (KIP-890 part 1). Kafka 3.6+ refuses a
// transactional batch for a partition that the producer did not add to its
// open transaction (AddPartitionsToTxn): without the check, a batch sent
// after its transaction ended, or to a partition the coordinator does not
// know of, is never ended by a marker, and the partition's last stable
// offset stays behind it for good (a hanging transaction).
//
// The produce path asks on every transactional batch, so the answer must
// be a map lookup: each id publishes an immutable view of its open
// transaction (producer id, epoch, partitions) whenever any of them
// changes, and Verify reads it without taking a lock a durable write may
// be holding.

// txnView is what Verify knows of one transactional id: its producer and
// the partitions of its open transaction (nil when none is open).
type txnView struct {
	producerID int64
	epoch      int16
	partitions map[TopicPartition]struct{}
}

// publish makes the id's current producer and open transaction what
// Verify sees. t.mu must be held; every change of t's producer, epoch,
// state or partitions calls it before it is answered.
func (c *Coordinator) publish(t *txn) {
	v := &txnView{producerID: t.producerID, epoch: t.epoch}
	if t.state == kmsg.TransactionStateOngoing {
		v.partitions = make(map[TopicPartition]struct{}, len(t.partitions))
		for _, tp := range t.partitionList() {
			v.partitions[tp] = struct{}{}
		}
	}
	c.views.Store(t.id, v)
}

// unpublish forgets an id that expired.
func (c *Coordinator) unpublish(id string) { c.views.Delete(id) }

// Verify checks that a transactional batch of the producer (id, producer
// id, epoch) may be written to topic-partition: the producer is the id's
// current one and the partition is in its open transaction. The errors are
// ErrInvalidProducerIDMapping (unknown id or another producer id),
// ErrInvalidProducerEpoch (another epoch) and ErrInvalidTxnState (the
// partition was not added, or no transaction is open).
func (c *Coordinator) Verify(id string, producerID int64, epoch int16, topic string, partition int32) error {
	got, ok := c.views.Load(id)
	if !ok && !c.coordinatesHere(id) {
		// In a cluster another node coordinates the id; Kafka's partition
		// leader would ask it (AddPartitionsToTxn, verify only). Wharf
		// does not yet: the batch passes, as before Kafka 3.6.
		return nil
	}
	if !ok {
		return fmt.Errorf("%w: transactional id %q has no producer", ErrInvalidProducerIDMapping, id)
	}
	v := got.(*txnView)
	switch {
	case v.producerID != producerID:
		return fmt.Errorf("%w: transactional id %q has producer %d, not %d", ErrInvalidProducerIDMapping, id, v.producerID, producerID)
	case v.epoch != epoch:
		return fmt.Errorf("%w: transactional id %q is at epoch %d, the batch has %d", ErrInvalidProducerEpoch, id, v.epoch, epoch)
	}
	if _, ok := v.partitions[TopicPartition{topic, partition}]; !ok {
		return fmt.Errorf("%w: %s-%d is not in the open transaction of %q (AddPartitionsToTxn first)", ErrInvalidTxnState, topic, partition, id)
	}
	return nil
}
