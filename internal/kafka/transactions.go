package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/txn"
)

// transactions returns the transaction coordinator (internal/txn) the
// transaction APIs go to, or COORDINATOR_NOT_AVAILABLE when the server has
// none. The node opens it, after the broker and the group coordinator, and
// closes it after Shutdown.
func (s *Server) transactions() (*txn.Coordinator, error) {
	txns := s.txns.Load()
	if txns == nil {
		return nil, kafkaErrorf(kerr.CoordinatorNotAvailable, "no transaction coordinator")
	}
	return txns, nil
}

// transactionsFor is transactions for a request of a transactional
// producer, which needs WRITE on its transactional id:
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED when r may not.
func (s *Server) transactionsFor(r *request, transactionalID string) (*txn.Coordinator, error) {
	if !s.allowed(r, opWrite, resTxnID, transactionalID) {
		return nil, errTxnIDDenied
	}
	return s.transactions()
}

// txnErrors maps the transaction coordinator's errors to Kafka's.
var txnErrors = []struct {
	err  error
	kerr *kerr.Error
}{
	{txn.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{txn.ErrNotCoordinator, kerr.NotCoordinator},
	{txn.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress},
	{txn.ErrInvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
	{txn.ErrProducerFenced, kerr.ProducerFenced},
	{txn.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{txn.ErrInvalidTxnState, kerr.InvalidTxnState},
	{txn.ErrConcurrentTransactions, kerr.ConcurrentTransactions},
	{txn.ErrInvalidTransactionTimeout, kerr.InvalidTransactionTimeout},
	{txn.ErrTransactionalIDNotFound, kerr.TransactionalIDNotFound},
	{txn.ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	{txn.ErrInvalidRequest, kerr.InvalidRequest},
	{group.ErrUnstableOffsetCommit, kerr.UnstableOffsetCommit},
	{group.ErrProducerFenced, kerr.ProducerFenced},
}

func txnError(err error) *kerr.Error {
	for _, te := range txnErrors {
		if errors.Is(err, te.err) {
			return te.kerr
		}
	}
	return nil
}

// coordinatorUnreachable reports a verification that failed because the
// transactional id's coordinator (on another node) could not answer: it
// moved, is loading, or did not answer in time. Kafka answers the
// producer NOT_ENOUGH_REPLICAS for these, a produce error every client
// retries (the coordinator errors are not produce errors to older ones).
func coordinatorUnreachable(err error) bool {
	return errors.Is(err, txn.ErrNotCoordinator) || errors.Is(err, txn.ErrCoordinatorLoadInProgress) ||
		errors.Is(err, txn.ErrCoordinatorNotAvailable) || errors.Is(err, txn.ErrConcurrentTransactions)
}

// txnErrorCode is errorCode for the transaction APIs. PRODUCER_FENCED came
// with KIP-588; older request versions are answered INVALID_PRODUCER_EPOCH
// as Kafka does, since their clients do not know the newer code.
func txnErrorCode(err error, version, fencedSince int16) int16 {
	code := errorCode(err)
	if code == kerr.ProducerFenced.Code && version < fencedSince {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// verifyTxnProduce refuses a transactional batch for a partition that is
// not in its producer's open transaction, as Kafka 3.6+ does (KIP-890
// part 1): INVALID_TXN_STATE, or INVALID_PRODUCER_EPOCH /
// INVALID_PRODUCER_ID_MAPPING for a producer that is not the transactional
// id's current one. A transactional batch without a transactional id in
// the request is refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka
// refuses it. Other batches, and every batch on a server without a
// transaction coordinator, pass; a payload too short to parse is left to
// the partition's validation. The check is a map lookup
// (txn.Coordinator.Verify), or in a cluster a call to the node that
// coordinates the id; when that node cannot answer, the batch is refused
// NOT_ENOUGH_REPLICAS (coordinatorUnreachable) and the producer retries.
// A verified batch comes with the guard its append must be given
// (broker.Partition.AppendVerified); nil for a batch not verified.
func (s *Server) verifyTxnProduce(ctx context.Context, transactionalID *string, topic string, p *broker.Partition, records []byte) (*broker.TxnGuard, error) {
	txns := s.txns.Load()
	if txns == nil {
		return nil, nil
	}
	h, err := record.ParseHeader(records)
	if err != nil || !h.Transactional() || h.Control() {
		return nil, nil
	}
	if transactionalID == nil {
		return nil, kafkaErrorf(kerr.TransactionalIDAuthorizationFailed, "a transactional batch in a produce request without a transactional id")
	}
	guard, err := txns.Verify(ctx, *transactionalID, h.ProducerID, h.ProducerEpoch, h.BaseSequence, topic, p)
	switch {
	case err == nil:
		return &guard, nil
	case coordinatorUnreachable(err):
		return nil, kafkaErrorf(kerr.NotEnoughReplicas, "produce to %s-%d: the transaction coordinator cannot verify the batch now: %v", topic, p.Index(), err)
	}
	return nil, fmt.Errorf("produce to %s-%d: %w", topic, p.Index(), err)
}
