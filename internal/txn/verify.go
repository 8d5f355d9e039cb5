package txn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
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
//
// In a cluster the id's coordinator may be another node (the leader of
// its partition of __transaction_state). The partition leader then asks
// it over the cluster's transport (broker.Partition.CallLeader; Kafka's
// leaders send AddPartitionsToTxn v4 with VerifyOnly) and the coordinator
// answers from its views (answerVerify). As in Kafka, only a producer's
// first batch of a transaction to a partition is verified: once it is
// written the partition knows the transaction is open there
// (broker.Partition.TxnOngoing), until the marker ends it.

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

// VerifyTimeout bounds how long a partition leader waits for another
// node's coordinator to answer a verification: no answer by then is
// ErrNotCoordinator, which the producer retries.
const VerifyTimeout = 5 * time.Second

// Verify checks that a transactional batch of the producer (id, producer
// id, epoch) may be written to partition p of topic: the producer is the id's
// current one and the partition is in its open transaction. The errors are
// ErrInvalidProducerIDMapping (unknown id or another producer id),
// ErrInvalidProducerEpoch (another epoch) and ErrInvalidTxnState (the
// partition was not added, or no transaction is open); in a cluster also
// ErrNotCoordinator, ErrCoordinatorLoadInProgress and
// ErrCoordinatorNotAvailable while the id's coordinator cannot answer.
func (c *Coordinator) Verify(ctx context.Context, id string, producerID int64, epoch int16, topic string, p *broker.Partition) error {
	tp := TopicPartition{topic, p.Index()}
	if !c.b.Clustered() {
		return c.verifyHere(id, producerID, epoch, tp)
	}
	if p.TxnOngoing(producerID) {
		return nil
	}
	s, err := c.clusterStore()
	if err != nil {
		return err
	}
	if _, leading := s.partitionFor(id).Leading(); leading {
		if err := s.available(id); err != nil {
			return err
		}
		return c.verifyHere(id, producerID, epoch, tp)
	}
	return c.verifyRemote(ctx, s.partitionFor(id), verifyRequest{id, producerID, epoch, tp})
}

// clusterStore is __transaction_state as a cluster node verifies
// against: it is not created here, since a producer with a transaction
// open has had its id initialised (InitProducerId creates the topic).
func (c *Coordinator) clusterStore() (*stateStore, error) {
	c.storeMu.Lock()
	defer c.storeMu.Unlock()
	if c.store == nil {
		s, err := openStore(c.b, c.cfg.Partitions, false)
		if errors.Is(err, broker.ErrUnknownTopic) {
			return nil, fmt.Errorf("%w: no transactional id has a producer yet", ErrInvalidProducerIDMapping)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
		}
		c.store = s
	}
	return c.store, nil
}

// verifyHere is Verify on the node that coordinates id.
func (c *Coordinator) verifyHere(id string, producerID int64, epoch int16, tp TopicPartition) error {
	got, ok := c.views.Load(id)
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
	if _, ok := v.partitions[tp]; !ok {
		return fmt.Errorf("%w: %s-%d is not in the open transaction of %q (AddPartitionsToTxn first)", ErrInvalidTxnState, tp.Topic, tp.Partition, id)
	}
	return nil
}

// verifyRequest is what a partition leader asks the coordinator of ID.
type verifyRequest struct {
	ID         string         `json:"id"`
	ProducerID int64          `json:"producer_id"`
	Epoch      int16          `json:"epoch"`
	Partition  TopicPartition `json:"partition"`
}

// verifyAnswer is the coordinator's answer: Error indexes verifyErrors
// (-1: verified), Message says why.
type verifyAnswer struct {
	Error   int    `json:"error"`
	Message string `json:"message,omitempty"`
}

// verifyErrors are the errors a verification is answered with, by their
// index on the wire.
var verifyErrors = []error{ErrInvalidProducerIDMapping, ErrInvalidProducerEpoch, ErrInvalidTxnState,
	ErrNotCoordinator, ErrCoordinatorLoadInProgress, ErrCoordinatorNotAvailable}

// verifyRemote asks the leader of p, the coordinator of the request's id.
// No answer in VerifyTimeout (the coordinator moved or its node is down)
// is ErrNotCoordinator: the producer retries and the next attempt asks
// the partition's new leader.
func (c *Coordinator) verifyRemote(ctx context.Context, p *broker.Partition, req verifyRequest) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, VerifyTimeout)
	defer cancel()
	out, err := p.CallLeader(ctx, data)
	if err != nil {
		return fmt.Errorf("%w: asking the coordinator of %q: %v", ErrNotCoordinator, req.ID, err)
	}
	var a verifyAnswer
	if err := json.Unmarshal(out, &a); err != nil || a.Error >= len(verifyErrors) {
		return fmt.Errorf("%w: the coordinator of %q answered %q", ErrCoordinatorNotAvailable, req.ID, out)
	}
	if a.Error < 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", verifyErrors[a.Error], a.Message)
}

// answerVerify answers a verifyRequest another node sent to this node's
// replica of __transaction_state (broker.HandlePartitionCalls).
func (c *Coordinator) answerVerify(_ context.Context, _ *broker.Partition, data []byte) ([]byte, error) {
	var req verifyRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("txn: a verification request: %w", err)
	}
	err := c.verifyCoordinated(req)
	a := verifyAnswer{Error: -1}
	if err != nil {
		a.Error, a.Message = len(verifyErrors)-1, err.Error() // ErrCoordinatorNotAvailable unless known
		for i, e := range verifyErrors {
			if errors.Is(err, e) {
				a.Error = i
				break
			}
		}
	}
	return json.Marshal(a)
}

// verifyCoordinated is verifyHere for a request from another node: only
// while this node coordinates the id.
func (c *Coordinator) verifyCoordinated(req verifyRequest) error {
	s, err := c.clusterStore()
	if err == nil {
		err = s.available(req.ID)
	}
	if err != nil {
		return err
	}
	return c.verifyHere(req.ID, req.ProducerID, req.Epoch, req.Partition)
}
