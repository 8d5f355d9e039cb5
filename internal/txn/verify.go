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
// (broker.TxnGuard.TxnOpen), until the marker ends it.
//
// A verification is tied to the batch's append by the guard the partition
// hands out before the coordinator is asked (broker.TxnGuard, Kafka's
// VerificationGuard): a marker the coordinator writes to the partition
// in between, its EndTxn having come first, makes the append fail
// INVALID_TXN_STATE rather than open a transaction the coordinator does
// not know of.

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
// current one and the partition is in its open transaction. The batch,
// whose first sequence is firstSeq, is then appended with p.AppendVerified
// and the guard returned. The errors are
// ErrInvalidProducerIDMapping (unknown id or another producer id),
// ErrInvalidProducerEpoch (another epoch) and ErrInvalidTxnState (the
// partition was not added, or no transaction is open); in a cluster also
// ErrNotCoordinator, ErrCoordinatorLoadInProgress and
// ErrCoordinatorNotAvailable while the id's coordinator cannot answer;
// and p's own (not its leader, offline) from taking the guard.
func (c *Coordinator) Verify(ctx context.Context, id string, producerID int64, epoch int16, firstSeq int32, topic string, p *broker.Partition) (broker.TxnGuard, error) {
	guard, err := p.StartTxnVerification(producerID, firstSeq)
	if err != nil {
		return guard, err
	}
	return guard, c.verify(ctx, verifyRequest{id, producerID, epoch, TopicPartition{topic, p.Index()}}, guard)
}

// verify is Verify once the guard is taken.
func (c *Coordinator) verify(ctx context.Context, req verifyRequest, guard broker.TxnGuard) error {
	if !c.b.Clustered() {
		return c.verifyHere(req) // a map lookup: asked every time
	}
	if guard.TxnOpen() {
		return nil
	}
	s, err := c.clusterStore()
	if err != nil {
		return err
	}
	coord := s.partitionFor(req.ID)
	if _, leading := coord.Leading(); !leading {
		return c.verifyRemote(ctx, coord, req)
	}
	return c.verifyCoordinated(req)
}

// clusterStore is __transaction_state as a cluster node verifies
// against. It is not created here: a producer with a transaction open
// had its id initialised, which created it; until this node has applied
// the topic, the coordinator is not available (the producer retries), as
// in Kafka.
func (c *Coordinator) clusterStore() (*stateStore, error) {
	c.storeMu.Lock()
	defer c.storeMu.Unlock()
	if c.store == nil {
		s, err := openStore(c.b, c.cfg.Partitions, false)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
		}
		c.store = s
	}
	return c.store, nil
}

// verifyHere is Verify on the node that coordinates the request's id.
func (c *Coordinator) verifyHere(req verifyRequest) error {
	id, producerID, epoch, tp := req.ID, req.ProducerID, req.Epoch, req.Partition
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
	Partition  TopicPartition `json:"partition"` // of the batch
}

// verifyAnswer is the coordinator's answer: Error is the text of one of
// verifyErrors ("": verified), Message says why.
type verifyAnswer struct {
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
}

// verifyErrors are the errors a verification is answered with; an answer
// names one by its text, so that nodes of different versions agree.
var verifyErrors = []error{ErrInvalidProducerIDMapping, ErrInvalidProducerEpoch, ErrInvalidTxnState,
	ErrNotCoordinator, ErrCoordinatorLoadInProgress, ErrCoordinatorNotAvailable}

// verifyRemote asks the leader of p, the coordinator of the request's id.
// A leader that stops leading before it answers (its node killed) is
// given up as soon as this node sees the leadership move, and the next
// leader is asked (CallLeader): a question is safe to ask twice. No
// answer in VerifyTimeout is ErrNotCoordinator: the producer retries.
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
	if err := json.Unmarshal(out, &a); err != nil {
		return fmt.Errorf("%w: the coordinator of %q answered %q", ErrCoordinatorNotAvailable, req.ID, out)
	}
	if a.Error == "" {
		return nil
	}
	for _, e := range verifyErrors {
		if e.Error() == a.Error {
			return fmt.Errorf("%w: %s", e, a.Message)
		}
	}
	return fmt.Errorf("%w: the coordinator of %q answered %s: %s", ErrCoordinatorNotAvailable, req.ID, a.Error, a.Message)
}

// answerVerify answers a verifyRequest another node sent to this node's
// replica of __transaction_state (broker.HandlePartitionCalls).
func (c *Coordinator) answerVerify(_ context.Context, _ *broker.Partition, data []byte) ([]byte, error) {
	var req verifyRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("txn: a verification request: %w", err)
	}
	var a verifyAnswer
	if err := c.verifyCoordinated(req); err != nil {
		a.Error, a.Message = ErrCoordinatorNotAvailable.Error(), err.Error()
		for _, e := range verifyErrors {
			if errors.Is(err, e) {
				a.Error = e.Error()
				break
			}
		}
	}
	return json.Marshal(a)
}

// verifyCoordinated is verifyHere in a cluster: only while this node
// coordinates the id.
func (c *Coordinator) verifyCoordinated(req verifyRequest) error {
	s, err := c.clusterStore()
	if err == nil {
		err = s.available(req.ID)
	}
	if err != nil {
		return err
	}
	return c.verifyHere(req)
}
