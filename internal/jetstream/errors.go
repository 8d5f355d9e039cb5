package jetstream

import "fmt"

// APIError is a JetStream API error as nats-server reports it: the HTTP-like
// code, JetStream's own error code and the description, which clients
// match on (nats.go maps err_code to its sentinel errors).
type APIError struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code,omitempty"`
	Description string `json:"description,omitempty"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (%d, %d)", e.Description, e.Code, e.ErrCode)
}

func apiErr(code int, errCode uint16, format string, args ...any) *APIError {
	return &APIError{Code: code, ErrCode: errCode, Description: fmt.Sprintf(format, args...)}
}

// The errors of nats-server 2.15 this core gives, with its codes and
// texts (server/errors.json). Those that take an argument are functions.
var (
	ErrBadRequest                = apiErr(400, 10003, "bad request")
	ErrStreamNotFound            = apiErr(404, 10059, "stream not found")
	ErrStreamNameExist           = apiErr(400, 10058, "stream name already in use with a different configuration")
	ErrStreamMismatch            = apiErr(400, 10056, "stream name in subject does not match request")
	ErrStreamSubjectOverlap      = apiErr(400, 10065, "subjects overlap with an existing stream")
	ErrStreamReplicas            = apiErr(500, 10074, "replicas > 1 not supported in non-clustered mode")
	ErrStreamNameBad             = apiErr(400, 10128, "Stream name can not contain path separators")
	ErrStreamSealed              = apiErr(400, 10109, "invalid operation on sealed stream")
	ErrStreamNotMatch            = apiErr(400, 10060, "expected stream does not match")
	ErrMsgTooLarge               = apiErr(400, 10054, "message size exceeds maximum allowed")
	ErrHeaderTooLarge            = apiErr(400, 10097, "header size exceeds maximum allowed of 64k")
	ErrMsgTTLDisabled            = apiErr(400, 10166, "per-message TTL is disabled")
	ErrNoMessageFound            = apiErr(404, 10037, "no message found")
	ErrConsumerNotFound          = apiErr(404, 10014, "consumer not found")
	ErrConsumerExists            = apiErr(400, 10148, "consumer already exists")
	ErrConsumerDoesNotExist      = apiErr(400, 10149, "consumer does not exist")
	ErrConsumerNameExist         = apiErr(400, 10013, "consumer name already in use")
	ErrConsumerDurableNotSet     = apiErr(400, 10018, "consumer expected to be durable but a durable name was not set")
	ErrConsumerDurableMismatch   = apiErr(400, 10017, "consumer name in subject does not match durable name in request")
	ErrConsumerEphemeralDurable  = apiErr(400, 10020, "consumer expected to be ephemeral but a durable name was set in request")
	ErrConsumerFilterMismatch    = apiErr(400, 10131, "Consumer create request did not match filtered subject from create subject")
	ErrConsumerNameMismatch      = apiErr(400, 10132, "Consumer Durable and Name have to be equal if both are provided")
	ErrConsumerBadDurableName    = apiErr(400, 10103, "durable name can not contain '.', '*', '>'")
	ErrConsumerNamePathSep       = apiErr(400, 10127, "Consumer name can not contain path separators")
	ErrConsumerDeliverWildcards  = apiErr(400, 10079, "consumer deliver subject has wildcards")
	ErrConsumerDeliverCycle      = apiErr(400, 10081, "consumer deliver subject forms a cycle")
	ErrConsumerPushMaxWaiting    = apiErr(400, 10080, "consumer in push mode can not set max waiting")
	ErrConsumerMaxWaitingNeg     = apiErr(400, 10087, "consumer max waiting needs to be positive")
	ErrConsumerHBRequiresPush    = apiErr(400, 10088, "consumer idle heartbeat requires a push based consumer")
	ErrConsumerFCRequiresPush    = apiErr(400, 10089, "consumer flow control requires a push based consumer")
	ErrConsumerFCNeedsHeartbeat  = apiErr(400, 10108, "consumer with flow control also needs heartbeats")
	ErrConsumerSmallHeartbeat    = apiErr(400, 10083, "consumer idle heartbeat needs to be >= 100ms")
	ErrConsumerMaxPendingAck     = apiErr(400, 10082, "consumer requires ack policy for max ack pending")
	ErrConsumerBothFilters       = apiErr(400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified")
	ErrConsumerFiltersOverlap    = apiErr(400, 10138, "consumer subject filters cannot overlap")
	ErrConsumerEmptyFilter       = apiErr(400, 10139, "consumer filter in FilterSubjects cannot be empty")
	ErrConsumerFilterNotSubset   = apiErr(400, 10093, "consumer filter subject is not a valid subset of the interest subjects")
	ErrConsumerMaxDeliverBackoff = apiErr(400, 10116, "max deliver is required to be > length of backoff values")
	ErrConsumerWQExplicitAck     = apiErr(400, 10098, "workqueue stream requires explicit ack")
	ErrConsumerWQMultiple        = apiErr(400, 10099, "multiple non-filtered consumers not allowed on workqueue stream")
	ErrConsumerWQNotUnique       = apiErr(400, 10100, "filtered consumer not unique on workqueue stream")
	ErrConsumerWQDeliverAll      = apiErr(400, 10101, "consumer must be deliver all on workqueue stream")
	ErrConsumerPullWQAck         = apiErr(400, 10084, "consumer in pull mode requires explicit ack policy on workqueue stream")
	ErrConsumerMaxBatchNegative  = apiErr(400, 10114, "consumer max request batch needs to be > 0")
	ErrConsumerMaxExpiresSmall   = apiErr(400, 10115, "consumer max request expires needs to be >= 1ms")
	ErrConsumerAckWaitNegative   = apiErr(400, 10183, "consumer ack wait needs to be positive")
	ErrConsumerBackoffNegative   = apiErr(400, 10184, "consumer backoff needs to be positive")
	ErrConsumerPriorityGroups    = apiErr(400, 10196, "consumer can not have priority groups when policy is none")
	ErrMaxConsumers              = apiErr(400, 10026, "maximum consumers limit reached")
	ErrRollupNotPermitted        = apiErr(500, 10111, "rollup not permitted")
	ErrMsgDeleteNotPermitted     = apiErr(500, 10057, "message delete not permitted")
	ErrMsgDeleteNoMessage        = apiErr(500, 10057, "no message found")
	ErrPurgeNotPermitted         = apiErr(500, 10110, "stream purge not permitted")
	ErrMaxMsgs                   = apiErr(503, 10077, "maximum messages exceeded")
	ErrMaxBytes                  = apiErr(503, 10077, "maximum bytes exceeded")
	ErrMaxMsgsPerSubject         = apiErr(503, 10077, "maximum messages per subject exceeded")
	ErrNotEmptyRequest           = apiErr(400, 10038, "expected an empty request payload")
	ErrStorageFailed             = apiErr(503, 10077, "storage failed")
)

// ErrInvalidJSON is nats-server's answer to a request body that is not
// the JSON it expects.
func ErrInvalidJSON(err error) *APIError { return apiErr(400, 10025, "invalid JSON: %v", err) }

// ErrStreamInvalidConfig is a stream configuration nats-server refuses,
// with its reason.
func ErrStreamInvalidConfig(format string, args ...any) *APIError {
	return apiErr(500, 10052, format, args...)
}

// ErrConsumerInvalidPolicy is a consumer configuration whose policies do
// not fit together.
func ErrConsumerInvalidPolicy(format string, args ...any) *APIError {
	return apiErr(400, 10094, format, args...)
}

// ErrConsumerCreate is a consumer create or update nats-server refuses
// for a reason of its own.
func ErrConsumerCreate(format string, args ...any) *APIError {
	return apiErr(500, 10012, format, args...)
}

// ErrWrongLastSequence is a publish whose Nats-Expected-Last-Sequence or
// Nats-Expected-Last-Subject-Sequence does not hold; seq is the actual one.
func ErrWrongLastSequence(seq uint64) *APIError {
	return apiErr(400, 10071, "wrong last sequence: %d", seq)
}

// ErrWrongLastMsgID is a publish whose Nats-Expected-Last-Msg-Id does not
// hold; id is the actual one.
func ErrWrongLastMsgID(id string) *APIError { return apiErr(400, 10070, "wrong last msg ID: %s", id) }

// ErrStreamStore is a storage failure behind a stream operation.
func ErrStreamStore(err error) *APIError { return apiErr(503, 10077, "%v", err) }

// ErrStreamCreate is a failure to create a stream's log.
func ErrStreamCreate(err error) *APIError { return apiErr(500, 10049, "%v", err) }

// ErrStreamGeneral is an internal failure of a stream operation.
func ErrStreamGeneral(err error) *APIError { return apiErr(500, 10051, "%v", err) }

// ErrStreamUpdate is a stream update nats-server refuses with a reason.
func ErrStreamUpdate(format string, args ...any) *APIError {
	return apiErr(500, 10069, format, args...)
}

// ErrStreamOffline is a request for a stream that could not be loaded.
func ErrStreamOffline(err error) *APIError { return apiErr(500, 10194, "stream is offline: %v", err) }
