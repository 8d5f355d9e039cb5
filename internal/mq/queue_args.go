package mq

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq/routing"
)

// Queue arguments, checked and interpreted as RabbitMQ 4.1 does
// (rabbit_amqqueue:check_declare_arguments and the queue types'
// capabilities). A policy may add to them or lower limits (policy.go:
// effectiveArgs); what is checked here are the arguments themselves.

// queueType is the x-queue-type of a queue.
type queueType uint8

const (
	classicQueue queueType = iota
	quorumQueue
	// streamQueue is a Kafka topic (stream.go): none of the classic and
	// quorum features apply to it.
	streamQueue
)

// module is the queue type's name in RabbitMQ's error texts.
func (t queueType) module() string {
	switch t {
	case quorumQueue:
		return "rabbit_quorum_queue"
	case streamQueue:
		return "rabbit_stream_queue"
	}
	return "rabbit_classic_queue"
}

// The arguments each queue type takes (its capabilities' queue_arguments
// in RabbitMQ 4.1): they are validated, compared on redeclaration, and an
// argument some other type takes is refused.
var (
	classicQueueArgs = []string{
		"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
		"x-max-length", "x-max-length-bytes", "x-max-priority", "x-overflow", "x-queue-mode",
		"x-queue-version", "x-single-active-consumer", "x-queue-type", "x-queue-master-locator",
		"x-queue-leader-locator",
	}
	quorumQueueArgs = []string{
		"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy", "x-expires",
		"x-max-length", "x-max-length-bytes", "x-max-in-memory-length", "x-max-in-memory-bytes",
		"x-overflow", "x-single-active-consumer", "x-queue-type", "x-quorum-initial-group-size",
		"x-delivery-limit", "x-message-ttl", "x-queue-leader-locator",
	}
	streamQueueArgs = []string{
		"x-max-length-bytes", "x-queue-type", "x-max-age", "x-stream-max-segment-size-bytes",
		"x-initial-cluster-size", "x-queue-leader-locator",
	}
)

func (t queueType) args() []string {
	switch t {
	case quorumQueue:
		return quorumQueueArgs
	case streamQueue:
		return streamQueueArgs
	}
	return classicQueueArgs
}

// typedQueueArgs is every argument some queue type takes.
var typedQueueArgs = func() map[string]bool {
	m := make(map[string]bool)
	for _, l := range [][]string{classicQueueArgs, quorumQueueArgs, streamQueueArgs} {
		for _, k := range l {
			m[k] = true
		}
	}
	return m
}()

// overflowMode is x-overflow.
type overflowMode uint8

const (
	dropHead overflowMode = iota
	rejectPublish
	rejectPublishDLX
)

// Limits of the arguments.
const (
	maxExpiry              = 315_360_000_000 // ms, ten years (rabbit_misc:check_expiry)
	maxSupportedPriority   = 255
	defaultDeliveryLimit   = 20 // quorum queues, RabbitMQ 4.0 on
	quorumHighPriorityFrom = 5  // quorum queues: priority 5 and above is "high"
)

// queueOptions is what a queue's arguments make it do.
type queueOptions struct {
	kind          queueType
	messageTTL    int64 // x-message-ttl in ms; -1 if none
	expires       int64 // x-expires in ms; 0 if none
	dlx           string
	hasDLX        bool // x-dead-letter-exchange given (even "": the default exchange)
	dlrk          string
	hasDLRK       bool
	maxLength     int64 // -1 if none
	maxBytes      int64 // -1 if none
	overflow      overflowMode
	levels        int // priority levels: 1 unless x-max-priority (classic) or quorum (2)
	singleActive  bool
	deliveryLimit int64 // quorum: returns allowed before dead-lettering; -1 unlimited
	// consumerTimeout is x-consumer-timeout; 0 means the registry default.
	consumerTimeout time.Duration
}

// limited reports whether a length limit applies.
func (o *queueOptions) limited() bool { return o.maxLength >= 0 || o.maxBytes >= 0 }

// level is the priority level a message with priority p goes to.
func (o *queueOptions) level(p uint8) int {
	switch {
	case o.levels == 1:
		return 0
	case o.kind == quorumQueue:
		if p >= quorumHighPriorityFrom {
			return 1
		}
		return 0
	}
	return min(int(p), o.levels-1)
}

// queueTypeOf returns the x-queue-type of args (classic when absent).
func queueTypeOf(args amqpwire.Table) queueType {
	s, _ := argString(args["x-queue-type"])
	switch s {
	case "quorum":
		return quorumQueue
	case "stream":
		return streamQueue
	}
	return classicQueue
}

// checkQueueArgs validates a new queue's arguments as RabbitMQ does, with
// its 406 texts: the type first, then the values of the arguments the type
// takes, then no argument that only other types take.
func checkQueueArgs(name, vhost string, args amqpwire.Table) error {
	q := resource("queue", name, vhost)
	if v, ok := args["x-queue-type"]; ok {
		if err := checkQueueTypeArg(v); err != "" {
			return errPrecondition("invalid arg 'x-queue-type' for %s: %s", q, err)
		}
	}
	t := queueTypeOf(args)
	taken := t.args()
	for _, k := range slices.Sorted(maps.Keys(args)) {
		check := queueArgChecks[k]
		if check == nil || !slices.Contains(taken, k) {
			continue
		}
		if err := check(args[k], args); err != "" {
			return errPrecondition("invalid arg '%s' for %s: %s", k, q, err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if typedQueueArgs[k] && !slices.Contains(taken, k) {
			return errPrecondition("invalid arg '%s' for %s of queue type %s", k, q, t.module())
		}
	}
	// Not a declare argument in RabbitMQ 4.1 (the channel reads it), but
	// a value that is not a duration would make no sense.
	if v, ok := args["x-consumer-timeout"]; ok {
		if err := checkNonNegInt(v, args); err != "" {
			return errPrecondition("invalid arg 'x-consumer-timeout' for %s: %s", q, err)
		}
	}
	return nil
}

// An argument check returns "" or the error term as RabbitMQ prints it
// with ~p: {value_negative,-1}, invalid_overflow, "expected integer, got
// longstr".
type argCheck func(v any, args amqpwire.Table) string

var queueArgChecks = map[string]argCheck{
	"x-expires":                       checkExpires,
	"x-message-ttl":                   checkMessageTTL,
	"x-dead-letter-exchange":          checkString,
	"x-dead-letter-routing-key":       checkDLRK,
	"x-dead-letter-strategy":          checkOneOf("invalid_dlx_strategy", "at-most-once", "at-least-once"),
	"x-max-length":                    checkNonNegInt,
	"x-max-length-bytes":              checkNonNegInt,
	"x-max-in-memory-length":          checkNonNegInt,
	"x-max-in-memory-bytes":           checkNonNegInt,
	"x-max-priority":                  checkMaxPriority,
	"x-overflow":                      checkOneOf("invalid_overflow", "drop-head", "reject-publish", "reject-publish-dlx"),
	"x-queue-version":                 checkQueueVersion,
	"x-single-active-consumer":        checkBool,
	"x-quorum-initial-group-size":     checkPositive,
	"x-initial-cluster-size":          checkPositive,
	"x-stream-max-segment-size-bytes": checkNonNegInt,
	"x-max-age":                       checkMaxAge,
	"x-delivery-limit":                checkInt, // not validated by RabbitMQ; negative means unlimited
}

func checkQueueTypeArg(v any) string {
	s, ok := argString(v)
	if !ok {
		return "{unacceptable_type," + routing.TypeName(v) + "}"
	}
	switch s {
	case "classic", "quorum", "stream":
		return ""
	}
	return strconv.Quote(fmt.Sprintf("unsupported queue type '%s'", s))
}

func checkInt(v any, _ amqpwire.Table) string {
	if _, ok := argInt(v); !ok {
		return strconv.Quote("expected integer, got " + routing.TypeName(v))
	}
	return ""
}

func checkNonNegInt(v any, args amqpwire.Table) string {
	if err := checkInt(v, args); err != "" {
		return err
	}
	if n, _ := argInt(v); n < 0 {
		return fmt.Sprintf("{value_negative,%d}", n)
	}
	return ""
}

func checkPositive(v any, args amqpwire.Table) string {
	if err := checkNonNegInt(v, args); err != "" {
		return err
	}
	if n, _ := argInt(v); n == 0 {
		return "{value_zero,0}"
	}
	return ""
}

func checkExpiry(n int64) string {
	switch {
	case n < 0:
		return fmt.Sprintf("{value_negative,%d}", n)
	case n > maxExpiry:
		return fmt.Sprintf("{value_too_large,%d}", n)
	}
	return ""
}

func checkExpires(v any, args amqpwire.Table) string {
	if err := checkInt(v, args); err != "" {
		return err
	}
	n, _ := argInt(v)
	if n == 0 {
		return "{value_zero,0}"
	}
	return checkExpiry(n)
}

func checkMessageTTL(v any, args amqpwire.Table) string {
	if err := checkInt(v, args); err != "" {
		return err
	}
	n, _ := argInt(v)
	return checkExpiry(n)
}

func checkMaxPriority(v any, args amqpwire.Table) string {
	if err := checkNonNegInt(v, args); err != "" {
		return err
	}
	if n, _ := argInt(v); n > maxSupportedPriority {
		return fmt.Sprintf("{max_value_exceeded,%d}", n)
	}
	return ""
}

func checkQueueVersion(v any, args amqpwire.Table) string {
	if err := checkNonNegInt(v, args); err != "" {
		return err
	}
	if n, _ := argInt(v); n != 2 {
		return strconv.Quote(fmt.Sprintf("unsupported queue version '%d'", n))
	}
	return ""
}

func checkString(v any, _ amqpwire.Table) string {
	if _, ok := argString(v); !ok {
		return "{unacceptable_type," + routing.TypeName(v) + "}"
	}
	return ""
}

func checkDLRK(v any, args amqpwire.Table) string {
	if err := checkString(v, args); err != "" {
		return err
	}
	if _, ok := args["x-dead-letter-exchange"]; !ok {
		return "routing_key_but_no_dlx_defined"
	}
	return ""
}

func checkBool(v any, _ amqpwire.Table) string {
	if _, ok := v.(bool); !ok {
		return "{unacceptable_type," + routing.TypeName(v) + "}"
	}
	return ""
}

func checkOneOf(invalid string, values ...string) argCheck {
	return func(v any, _ amqpwire.Table) string {
		s, ok := argString(v)
		if !ok {
			return "{unacceptable_type," + routing.TypeName(v) + "}"
		}
		if !slices.Contains(values, s) {
			return invalid
		}
		return ""
	}
}

// checkConsumeArgs validates basic.consume arguments: x-priority must be
// an integer.
func checkConsumeArgs(queue, vhost string, args amqpwire.Table) error {
	if v, ok := args["x-priority"]; ok {
		if err := checkInt(v, args); err != "" {
			return errPrecondition("invalid arg 'x-priority' for %s: %s", resource("queue", queue, vhost), err)
		}
	}
	return nil
}

func argInt(v any) (int64, bool) { return routing.TableInt(v) }

func argString(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}

// parseQueueOptions interprets validated arguments. Values that checking
// would have refused (a definition stored by an older version) are
// ignored.
func parseQueueOptions(args amqpwire.Table) queueOptions {
	o := queueOptions{kind: queueTypeOf(args), messageTTL: -1, maxLength: -1, maxBytes: -1, levels: 1, deliveryLimit: -1}
	if o.kind == streamQueue {
		return o
	}
	intArg := func(k string) (int64, bool) {
		v, ok := args[k]
		if !ok {
			return 0, false
		}
		return argInt(v)
	}
	if n, ok := intArg("x-message-ttl"); ok && n >= 0 {
		o.messageTTL = n
	}
	if n, ok := intArg("x-expires"); ok && n > 0 {
		o.expires = n
	}
	o.dlx, o.hasDLX = argString(args["x-dead-letter-exchange"])
	if o.hasDLX {
		o.dlrk, o.hasDLRK = argString(args["x-dead-letter-routing-key"])
	}
	if n, ok := intArg("x-max-length"); ok && n >= 0 {
		o.maxLength = n
	}
	if n, ok := intArg("x-max-length-bytes"); ok && n >= 0 {
		o.maxBytes = n
	}
	switch s, _ := argString(args["x-overflow"]); s {
	case "reject-publish":
		o.overflow = rejectPublish
	case "reject-publish-dlx":
		// Quorum queues do not support it and fall back to drop-head
		// (rabbit_quorum_queue:overflow/3).
		if o.kind == classicQueue {
			o.overflow = rejectPublishDLX
		}
	}
	o.singleActive, _ = args["x-single-active-consumer"].(bool)
	if n, ok := intArg("x-consumer-timeout"); ok && n >= 0 {
		o.consumerTimeout = time.Duration(n) * time.Millisecond
		if n == 0 {
			o.consumerTimeout = time.Nanosecond // 0 ms: any unacknowledged delivery times out
		}
	}
	switch o.kind {
	case classicQueue:
		if n, ok := intArg("x-max-priority"); ok && n > 0 {
			o.levels = int(min(n, maxSupportedPriority)) + 1
		}
	case quorumQueue:
		o.levels = 2 // RabbitMQ 4.x quorum queues: normal and high
		o.deliveryLimit = defaultDeliveryLimit
		if n, ok := intArg("x-delivery-limit"); ok {
			o.deliveryLimit = max(n, -1)
		}
	}
	return o
}
