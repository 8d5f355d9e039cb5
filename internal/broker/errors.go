package broker

import "errors"

// Errors returned by the broker core. Protocol front ends map them to their
// own codes with errors.Is; the wrapped text says what exactly was wrong.
var (
	ErrUnknownTopic      = errors.New("unknown topic")
	ErrUnknownPartition  = errors.New("unknown partition")
	ErrTopicExists       = errors.New("topic already exists")
	ErrInvalidTopic      = errors.New("invalid topic name")
	ErrInvalidPartitions = errors.New("invalid partition count")
	ErrInvalidConfig     = errors.New("invalid config")
	ErrRecordTooLarge    = errors.New("record batch larger than max.message.bytes")
	ErrCorruptMessage    = errors.New("corrupt record batch")
	ErrInvalidRecord     = errors.New("invalid record batch")
	ErrBatchTooLarge     = errors.New("record batch larger than segment.bytes")
	ErrOffsetOutOfRange  = errors.New("offset out of range")
	ErrStorage           = errors.New("storage error")
	ErrClosed            = errors.New("broker closed")
	// ErrRequestTimedOut is an acknowledgement not given within the
	// producer's timeout (Kafka's REQUEST_TIMED_OUT).
	ErrRequestTimedOut = errors.New("request timed out")

	// ErrInvalidRequest is a request Kafka would refuse as a whole.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrProtectedTopic refuses a change that would break what the broker
	// keeps in a topic: deleting or reshaping an internal topic, or
	// deleting the log of a stream queue.
	ErrProtectedTopic = errors.New("protected topic")

	// Idempotent producers.
	ErrOutOfOrderSequence   = errors.New("out of order sequence number")
	ErrInvalidProducerEpoch = errors.New("invalid producer epoch")

	// ErrInvalidTxnState is a transactional batch whose transaction ended
	// on the partition after it was verified (TxnGuard); internal/txn
	// answers the same error for a batch its coordinator refuses.
	ErrInvalidTxnState = errors.New("invalid transaction state")
)
