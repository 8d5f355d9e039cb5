package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/txn"
)

// transactions returns the transaction coordinator (internal/txn) the
// transaction APIs go to, or COORDINATOR_NOT_AVAILABLE when the server has
// none. The node opens it, after the broker and the group coordinator, and
// closes it after Shutdown.
func (s *Server) transactions() (*txn.Coordinator, error) {
	if s.txns == nil {
		return nil, kafkaErrorf(kerr.CoordinatorNotAvailable, "no transaction coordinator")
	}
	return s.txns, nil
}

// txnErrors maps the transaction coordinator's errors to Kafka's.
var txnErrors = []struct {
	err  error
	kerr *kerr.Error
}{
	{txn.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
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
