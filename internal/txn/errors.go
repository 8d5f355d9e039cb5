package txn

import (
	"errors"

	"github.com/wharf-mq/wharf/internal/broker"
)

// Errors the coordinator answers with; each stands for the Kafka error of
// the same name, which the front end maps with errors.Is.
var (
	ErrCoordinatorNotAvailable   = errors.New("coordinator not available")
	ErrNotCoordinator            = errors.New("not the coordinator")
	ErrCoordinatorLoadInProgress = errors.New("coordinator load in progress")
	ErrInvalidProducerIDMapping  = errors.New("invalid producer id mapping")
	ErrProducerFenced            = errors.New("producer fenced")
	ErrInvalidProducerEpoch      = errors.New("invalid producer epoch")
	ErrInvalidTxnState           = broker.ErrInvalidTxnState // also a partition's refusal of a batch (broker.TxnGuard)
	ErrConcurrentTransactions    = errors.New("concurrent transactions")
	ErrInvalidTransactionTimeout = errors.New("invalid transaction timeout")
	ErrTransactionalIDNotFound   = errors.New("transactional id not found")
	ErrUnknownTopicOrPartition   = errors.New("unknown topic or partition")
	ErrInvalidRequest            = errors.New("invalid request")
)
