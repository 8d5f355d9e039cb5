package kafka

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/replica"
)

// errorCode maps an error from the broker core to the Kafka error code a
// client expects for it. Unrecognised errors are UNKNOWN_SERVER_ERROR.
func errorCode(err error) int16 {
	return kafkaError(err).Code
}

// kafkaError is errorCode returning the kerr value (for its message).
func kafkaError(err error) *kerr.Error {
	var (
		corrupt *replica.CorruptionError
		pe      *protocolError
	)
	switch {
	case err == nil:
		return &kerr.Error{Message: "NONE", Code: 0}
	case errors.As(err, &pe):
		return pe.kerr
	case errors.Is(err, broker.ErrUnknownTopic), errors.Is(err, broker.ErrUnknownPartition):
		return kerr.UnknownTopicOrPartition
	case errors.Is(err, broker.ErrTopicExists):
		return kerr.TopicAlreadyExists
	case errors.Is(err, broker.ErrInvalidTopic):
		return kerr.InvalidTopicException
	case errors.Is(err, broker.ErrInvalidRequest):
		return kerr.InvalidRequest
	case errors.Is(err, broker.ErrProtectedTopic):
		// Redpanda's answer for its protected topics.
		return kerr.TopicAuthorizationFailed
	case errors.Is(err, broker.ErrInvalidPartitions):
		return kerr.InvalidPartitions
	case errors.Is(err, broker.ErrInvalidConfig):
		return kerr.InvalidConfig
	case errors.Is(err, broker.ErrRecordTooLarge):
		return kerr.MessageTooLarge
	case errors.Is(err, broker.ErrCorruptMessage):
		return kerr.CorruptMessage
	case errors.Is(err, broker.ErrInvalidRecord):
		return kerr.InvalidRecord
	case errors.Is(err, broker.ErrBatchTooLarge):
		return kerr.RecordListTooLarge
	case errors.Is(err, broker.ErrOffsetOutOfRange), errors.Is(err, replica.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange
	case errors.Is(err, broker.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber
	case errors.Is(err, broker.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch
	case errors.Is(err, broker.ErrNotLeader):
		return kerr.NotLeaderForPartition
	case errors.Is(err, broker.ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas
	case errors.Is(err, broker.ErrRequestTimedOut):
		return kerr.RequestTimedOut
	case errors.Is(err, broker.ErrElectionNotNeeded):
		return kerr.ElectionNotNeeded
	case errors.Is(err, broker.ErrPreferredLeaderNotAvailable):
		return kerr.PreferredLeaderNotAvailable
	case errors.Is(err, broker.ErrEligibleLeadersNotAvailable):
		return kerr.EligibleLeadersNotAvailable
	case errors.Is(err, broker.ErrInvalidReplicationFactor):
		return kerr.InvalidReplicationFactor
	case errors.Is(err, broker.ErrStorage), errors.As(err, &corrupt):
		return kerr.KafkaStorageError
	case errors.Is(err, broker.ErrClosed):
		// The broker is stopping: retriable, and makes the client look
		// for the partition again.
		return kerr.NotLeaderForPartition
	case errors.Is(err, replica.ErrClosed):
		// The log was closed under us: its topic was deleted (or the
		// broker is stopping). Retriable, and sends the client to
		// refresh its metadata.
		return kerr.UnknownTopicOrPartition
	default:
		if k := groupError(err); k != nil {
			return k
		}
		if k := txnError(err); k != nil {
			return k
		}
		return kerr.UnknownServerError
	}
}

// groupErrors maps the group coordinator's errors to Kafka's.
var groupErrors = []struct {
	err  error
	kerr *kerr.Error
}{
	{group.ErrInvalidGroupID, kerr.InvalidGroupID},
	{group.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{group.ErrNotCoordinator, kerr.NotCoordinator},
	{group.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress},
	{group.ErrUnknownMemberID, kerr.UnknownMemberID},
	{group.ErrMemberIDRequired, kerr.MemberIDRequired},
	{group.ErrIllegalGeneration, kerr.IllegalGeneration},
	{group.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{group.ErrInconsistentGroupProtocol, kerr.InconsistentGroupProtocol},
	{group.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{group.ErrFencedInstanceID, kerr.FencedInstanceID},
	{group.ErrGroupIDNotFound, kerr.GroupIDNotFound},
	{group.ErrNonEmptyGroup, kerr.NonEmptyGroup},
	{group.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},
	{group.ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	{group.ErrUnknownTopicID, kerr.UnknownTopicID},
	{group.ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge},
	{group.ErrInvalidCommitOffsetSize, kerr.InvalidCommitOffsetSize},
	{group.ErrFencedMemberEpoch, kerr.FencedMemberEpoch},
	{group.ErrStaleMemberEpoch, kerr.StaleMemberEpoch},
	{group.ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID},
	{group.ErrUnsupportedAssignor, kerr.UnsupportedAssignor},
	{group.ErrInvalidRequest, kerr.InvalidRequest},
	{group.ErrInvalidRegularExpression, kerr.InvalidRegularExpression},
}

func groupError(err error) *kerr.Error {
	for _, ge := range groupErrors {
		if errors.Is(err, ge.err) {
			return ge.kerr
		}
	}
	return nil
}

// errorMessage is the optional ErrorMessage field for err: nil for success,
// the error text otherwise.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// protocolError is an error the front end decides itself (a request that
// breaks a protocol rule), carrying the Kafka error to answer with.
type protocolError struct {
	kerr *kerr.Error
	msg  string
}

func (e *protocolError) Error() string { return e.msg }

// kafkaErrorf makes a protocolError answering k with a formatted message.
func kafkaErrorf(k *kerr.Error, format string, args ...any) error {
	return &protocolError{kerr: k, msg: fmt.Sprintf(format, args...)}
}
