package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/txn"
)

// The transaction coordinator (internal/txn) behind the transaction APIs.
// A server given none in its Config opens its own on the broker: at once
// when __transaction_state already exists (so that a restart finishes or
// times out the transactions left open), otherwise on the first request
// that needs it, so a broker whose clients never use transactions has no
// such topic.

// transactions returns the transaction coordinator, opening it if needed.
func (s *Server) transactions() (*txn.Coordinator, error) {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	if s.txns != nil {
		return s.txns, nil
	}
	if s.txnClosed {
		return nil, kafkaErrorf(kerr.CoordinatorNotAvailable, "the server is shutting down")
	}
	cfg := txn.Config{Broker: s.broker, Logger: s.log}
	if s.groups != nil {
		cfg.Groups = s.groups
	}
	c, err := txn.Open(cfg)
	if err != nil {
		s.log.Error("cannot start the transaction coordinator", "err", err)
		return nil, kafkaErrorf(kerr.CoordinatorNotAvailable, "transaction coordinator: %v", err)
	}
	s.txns, s.ownsTxns = c, true
	return c, nil
}

// openTransactionsIfUsed starts the coordinator at server start when the
// broker has transaction state to recover.
func (s *Server) openTransactionsIfUsed() {
	if _, err := s.broker.Topic(txn.StateTopic); err == nil {
		_, _ = s.transactions()
	}
}

// closeTransactions stops a coordinator the server opened itself.
func (s *Server) closeTransactions() {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	s.txnClosed = true
	if s.txns != nil && s.ownsTxns {
		s.txns.Close()
	}
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
