package group

import "errors"

// Errors the coordinator answers with. Each stands for the Kafka error of
// the same name; the front end maps them with errors.Is, and the wrapped
// text (when there is one) becomes the response's error message.
var (
	ErrInvalidGroupID            = errors.New("invalid group id")
	ErrCoordinatorNotAvailable   = errors.New("coordinator not available")
	ErrNotCoordinator            = errors.New("not the coordinator")
	ErrCoordinatorLoadInProgress = errors.New("coordinator load in progress")
	ErrUnknownMemberID           = errors.New("unknown member id")
	ErrMemberIDRequired          = errors.New("member id required")
	ErrIllegalGeneration         = errors.New("illegal generation")
	ErrRebalanceInProgress       = errors.New("rebalance in progress")
	ErrInconsistentGroupProtocol = errors.New("inconsistent group protocol")
	ErrInvalidSessionTimeout     = errors.New("invalid session timeout")
	ErrFencedInstanceID          = errors.New("fenced instance id")
	ErrGroupIDNotFound           = errors.New("group id not found")
	ErrNonEmptyGroup             = errors.New("group not empty")
	ErrGroupSubscribedToTopic    = errors.New("group subscribed to topic")
	ErrUnknownTopicOrPartition   = errors.New("unknown topic or partition")
	ErrUnknownTopicID            = errors.New("unknown topic id")
	ErrOffsetMetadataTooLarge    = errors.New("offset metadata too large")
	ErrInvalidCommitOffsetSize   = errors.New("invalid commit offset size")
	ErrFencedMemberEpoch         = errors.New("fenced member epoch")
	ErrStaleMemberEpoch          = errors.New("stale member epoch")
	ErrUnreleasedInstanceID      = errors.New("unreleased instance id")
	ErrUnsupportedAssignor       = errors.New("unsupported assignor")
	ErrInvalidRequest            = errors.New("invalid request")
	ErrInvalidRegularExpression  = errors.New("invalid regular expression")
	ErrUnstableOffsetCommit      = errors.New("unstable offset commit")
	ErrProducerFenced            = errors.New("producer fenced")
)
