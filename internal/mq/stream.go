package mq

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq/routing"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Stream queues. A queue declared with x-queue-type stream is a Kafka topic
// of one partition, owned by the broker: publishing appends a record to the
// topic's log, consumers read the log from an offset of their choosing, acks
// only return prefetch credit, and retention (x-max-age,
// x-max-length-bytes) is the topic's. Kafka clients read and write the same
// log as the topic named by StreamTopicName. The record layout that bridges
// the two protocols is in stream_codec.go, the consumers in
// stream_consume.go.

// StreamStore gives stream queues their logs. internal/streambridge
// implements it over the Kafka core's topics (neither core imports the
// other) and the node passes it in Config.Streams.
type StreamStore interface {
	// CreateStream creates the topic name with one partition and the
	// configs cfg.TopicConfigs() returns. If the topic exists already (a
	// topic made by Kafka clients, or left behind by a crash) it opens it
	// as it is, configs unchanged, like OpenStream.
	CreateStream(name string, cfg StreamConfig) (Stream, error)
	// OpenStream opens an existing topic. A missing topic is an error
	// wrapping ErrStreamNotFound; a topic with more than one partition one
	// wrapping ErrNotAStream.
	OpenStream(name string) (Stream, error)
	// DeleteStream deletes the topic and its data; a missing topic is not
	// an error.
	DeleteStream(name string) error
}

// Stream is the log of one stream queue: partition 0 of its topic.
type Stream interface {
	// Append appends one record batch (built by this package, producer id
	// -1) and returns the offset of its first record. It need not wait
	// for fsync: Sync does that, for publisher confirms.
	Append(batch []byte) (baseOffset int64, err error)
	// Sync makes everything appended so far durable. A log closed (its
	// topic deleted, the broker stopping) is an error.
	Sync() error
	// Read returns whole batches from the one holding offset, up to
	// maxBytes but at least one batch; offset == EndOffset gives an empty
	// slice. The caller releases the slice.
	Read(offset, maxBytes int64) (*replica.Slice, error)
	// StartOffset is the first offset retention has kept.
	StartOffset() int64
	// EndOffset is the offset the next record will get.
	EndOffset() int64
	// OffsetForTime returns the first offset whose record timestamp is at
	// least ts (unix ms); found is false when there is none.
	OffsetForTime(ts int64) (offset int64, found bool, err error)
	// Notify registers a one-shot wake-up: after the next append, ch gets
	// a non-blocking send. Unnotify removes one that has not fired.
	Notify(ch chan<- struct{})
	Unnotify(ch chan<- struct{})
}

// Errors a StreamStore returns (wrapped).
var (
	// ErrStreamNotFound: the topic of a stream does not exist.
	ErrStreamNotFound = errors.New("mq: stream topic does not exist")
	// ErrNotAStream: the topic cannot back a stream queue (it has more
	// than one partition).
	ErrNotAStream = errors.New("mq: topic cannot back a stream queue")
)

// StreamConfig is the retention of a stream queue, from its arguments.
type StreamConfig struct {
	// MaxAge is x-max-age: records older than this may be deleted, a
	// segment at a time. 0 keeps them (RabbitMQ's default).
	MaxAge time.Duration
	// MaxBytes is x-max-length-bytes: the log is trimmed, a segment at a
	// time, to stay under it. -1 means no limit.
	MaxBytes int64
	// MaxSegmentBytes is x-stream-max-segment-size-bytes, the size at
	// which a segment is closed; 0 means RabbitMQ's default, 500 MB.
	MaxSegmentBytes int64
}

// defaultStreamSegmentBytes is RabbitMQ's default
// x-stream-max-segment-size-bytes.
const defaultStreamSegmentBytes = 500_000_000

// maxStreamSegmentBytes is the largest x-stream-max-segment-size-bytes
// RabbitMQ accepts (?MAX_STREAM_MAX_SEGMENT_SIZE).
const maxStreamSegmentBytes = 3_000_000_000

// TopicConfigs returns the topic configs of a stream with this retention:
// retention.ms (-1 without x-max-age), retention.bytes (-1 without
// x-max-length-bytes), segment.bytes (within Kafka's 14 to 2^31-1) and
// cleanup.policy delete.
func (c StreamConfig) TopicConfigs() map[string]string {
	retentionMs := int64(-1)
	if c.MaxAge > 0 {
		retentionMs = c.MaxAge.Milliseconds()
	}
	retentionBytes := int64(-1)
	if c.MaxBytes >= 0 {
		retentionBytes = c.MaxBytes
	}
	segment := c.MaxSegmentBytes
	if segment <= 0 {
		segment = defaultStreamSegmentBytes
	}
	segment = min(max(segment, 14), math.MaxInt32)
	return map[string]string{
		"retention.ms":    strconv.FormatInt(retentionMs, 10),
		"retention.bytes": strconv.FormatInt(retentionBytes, 10),
		"segment.bytes":   strconv.FormatInt(segment, 10),
		"cleanup.policy":  "delete",
	}
}

// streamConfigOf reads a stream queue's retention from its (checked)
// arguments.
func streamConfigOf(args amqpwire.Table) StreamConfig {
	c := StreamConfig{MaxBytes: -1}
	if s, ok := argString(args["x-max-age"]); ok {
		if ms, ok := parseMaxAge(s); ok {
			c.MaxAge = time.Duration(ms) * time.Millisecond
		}
	}
	if n, ok := argInt(args["x-max-length-bytes"]); ok && n >= 0 {
		c.MaxBytes = n
	}
	if n, ok := argInt(args["x-stream-max-segment-size-bytes"]); ok && n > 0 {
		c.MaxSegmentBytes = n
	}
	return c
}

// maxAgeUnits are the units of x-max-age (and of interval x-stream-offset
// values), as rabbit_amqqueue:check_max_age has them: Y is 365 days, M 30.
var maxAgeUnits = map[string]int64{
	"Y": 365 * 24 * 3600 * 1000,
	"M": 30 * 24 * 3600 * 1000,
	"D": 24 * 3600 * 1000,
	"h": 3600 * 1000,
	"m": 60 * 1000,
	"s": 1000,
}

// parseMaxAge reads "7D", "12h", "30s" ...: a positive integer and a unit.
// It returns the duration in ms.
func parseMaxAge(s string) (int64, bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	unit, ok := maxAgeUnits[s[i:]]
	if err != nil || !ok || n <= 0 || n > math.MaxInt64/unit {
		return 0, false
	}
	return n * unit, true
}

func checkMaxAge(v any, _ amqpwire.Table) string {
	s, ok := v.(string) // RabbitMQ takes only a longstr here
	if !ok {
		return "{unacceptable_type," + routing.TypeName(v) + "}"
	}
	if _, ok := parseMaxAge(s); !ok {
		return "invalid_max_age"
	}
	return ""
}

// checkStreamProperties refuses what a stream queue cannot be, with
// RabbitMQ's texts: the checks of quorum queues, and a segment size above
// RabbitMQ's maximum.
func checkStreamProperties(d QueueDef, vhost string) error {
	if err := checkQuorumProperties(d, vhost); err != nil {
		return err
	}
	if n, ok := argInt(d.Args["x-stream-max-segment-size-bytes"]); ok && n > maxStreamSegmentBytes {
		return errPrecondition("Exceeded max value for x-stream-max-segment-size-bytes")
	}
	return nil
}

// StreamTopicName is the Kafka topic of the stream queue queue in vhost:
// the queue's name in the default vhost "/", and in any other vhost the
// vhost's name, with every character but ASCII letters, digits, '_' and
// '-' replaced by '_', then '.' and the queue's name ("prod.orders" for
// queue "orders" in vhost "prod", "_prod.orders" in vhost "/prod"). Two
// stream queues that would share a topic cannot both be declared.
func StreamTopicName(vhost, queue string) string {
	if vhost == DefaultVHost {
		return queue
	}
	b := []byte(vhost)
	for i, c := range b {
		if !isTopicNameChar(c) || c == '.' {
			b[i] = '_'
		}
	}
	return string(b) + "." + queue
}

func isTopicNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// maxTopicNameLen is Kafka's limit on topic names.
const maxTopicNameLen = 249

// checkStreamTopic refuses a stream queue whose topic name Kafka would not
// accept, or that would take over one of Kafka's internal topics.
func checkStreamTopic(topic, queue, vhost string) error {
	bad := topic == "" || topic == "." || topic == ".." || len(topic) > maxTopicNameLen ||
		strings.HasPrefix(topic, "__")
	for i := 0; i < len(topic) && !bad; i++ {
		bad = !isTopicNameChar(topic[i])
	}
	if bad {
		return errPrecondition("cannot declare stream %s: its topic name '%s' is not a valid Kafka topic name "+
			"(1 to 249 ASCII letters, digits, '.', '_' and '-', not starting with '__')",
			resource("queue", queue, vhost), topic)
	}
	return nil
}

// streamLog is a stream queue's log, with the name of its topic. It is a
// replica.Target: the syncer fsyncs it for publisher confirms, along
// with the queue stores.
type streamLog struct {
	Stream
	topic   string
	deleted atomic.Bool // the queue was deleted, and its topic with it
}

// Sync is the Stream's, failing closed: an error of the stream (a failed
// fsync, a closed log) fails the confirms waiting for it (nacks), unless
// the queue was deleted meanwhile: RabbitMQ confirms a message whose
// queue was deleted.
func (s *streamLog) Sync() error {
	err := s.Stream.Sync()
	if err != nil && s.deleted.Load() {
		return nil
	}
	return err
}

// claimStream records that topic belongs to the stream queue owner (a
// resource text); it returns the current owner instead if another queue
// has it.
func (r *Registry) claimStream(topic, owner string) (string, bool) {
	r.streamMu.Lock()
	defer r.streamMu.Unlock()
	if cur, taken := r.streamOwners[topic]; taken {
		return cur, false
	}
	r.streamOwners[topic] = owner
	return owner, true
}

func (r *Registry) releaseStream(topic string) {
	r.streamMu.Lock()
	delete(r.streamOwners, topic)
	r.streamMu.Unlock()
}

// createStreamQueue makes a new stream queue: its topic first (created,
// or an existing Kafka topic adopted), then its definition, unless the
// name has one when the write is applied, as for other durable queues
// (createDefinition): another node's declaration of it landed first, and
// createStreamQueue returns that queue, created false. Caller holds
// defMu.
func (v *VHost) createStreamQueue(d QueueDef) (q *queue, created bool, err error) {
	if v.r.closed.Load() {
		return nil, false, ErrClosed
	}
	res := resource("queue", d.Name, v.name)
	if v.r.cfg.Streams == nil {
		return nil, false, errPrecondition("cannot declare %s: stream queues are not available on this node", res)
	}
	topic := StreamTopicName(v.name, d.Name)
	if err := checkStreamTopic(topic, d.Name, v.name); err != nil {
		return nil, false, err
	}
	if owner, ok := v.r.claimStream(topic, res); !ok {
		return nil, false, errPrecondition("cannot declare %s: its topic '%s' belongs to %s", res, topic, owner)
	}
	effective, _ := v.effectiveQueueArgs(d)
	st, err := v.r.cfg.Streams.CreateStream(topic, streamConfigOf(effective))
	if err != nil {
		v.r.releaseStream(topic)
		if errors.Is(err, ErrNotAStream) {
			return nil, false, errPrecondition("cannot declare %s on topic '%s': %v", res, topic, err)
		}
		return nil, false, errInternal("create stream", err)
	}
	// The topic stays if the definition is not written: it may have
	// been a Kafka topic before (or be the winning declaration's), and an
	// orphan topic is only an ordinary topic.
	args, err := encodeArgs(d.Args)
	var live, value []byte
	if err == nil {
		value = mustJSON(queueRecord{VHost: v.name, Name: d.Name, Stream: topic, Args: args})
		live, err = v.r.createDefinition(queueKey(v.name, d.Name), value)
	}
	if err != nil {
		v.r.releaseStream(topic)
		return nil, false, errInternal("store queue", err)
	}
	if !bytes.Equal(live, value) {
		v.r.releaseStream(topic) // the queue that won claims it, if a stream queue
		q, err := v.existingQueue(live)
		return q, false, err
	}
	q = v.newStreamQueue(d, &streamLog{Stream: st, topic: topic})
	v.mu.Lock()
	v.queues[d.Name] = q
	v.mu.Unlock()
	return q, true, nil
}

// loadStreamQueue opens a stream queue from its definition at Open. Its
// topic is recreated (empty) if it is gone, as the definition says the
// queue exists. Without Config.Streams the queue is left out, its
// definition kept.
func (v *VHost) loadStreamQueue(d QueueDef, topic string) (*queue, error) {
	if v.r.cfg.Streams == nil {
		v.r.logger.Warn("mq: stream queues are not available; leaving a stream queue out", "queue", d.Name, "vhost", v.name)
		return nil, nil
	}
	if topic == "" {
		topic = StreamTopicName(v.name, d.Name)
	}
	st, err := v.r.cfg.Streams.OpenStream(topic)
	if errors.Is(err, ErrStreamNotFound) {
		v.r.logger.Warn("mq: the topic of a stream queue is gone; creating it empty", "queue", d.Name, "vhost", v.name, "topic", topic)
		st, err = v.r.cfg.Streams.CreateStream(topic, streamConfigOf(d.Args))
	}
	if err != nil {
		return nil, fmt.Errorf("open stream %q: %w", topic, err)
	}
	v.r.claimStream(topic, resource("queue", d.Name, v.name))
	return v.newStreamQueue(d, &streamLog{Stream: st, topic: topic}), nil
}

func (v *VHost) newStreamQueue(d QueueDef, st *streamLog) *queue {
	opts := parseQueueOptions(d.Args)
	return &queue{
		r: v.r, vh: v, name: d.Name, def: d, opts: opts, stream: st,
		sources: make(map[*exchange]int),
		unacked: make(map[QueueTag]*entry),
		ready:   newReadyQueue(opts.levels),
	}
}

// deleteStream removes a deleted stream queue's topic and frees its name.
// Called with defMu held, so that a queue of the same name declared next
// cannot adopt the topic before it is gone.
func (r *Registry) deleteStream(st *streamLog) {
	st.deleted.Store(true)
	if err := r.cfg.Streams.DeleteStream(st.topic); err != nil {
		r.logger.Error("mq: delete the topic of a stream queue", "topic", st.topic, "err", err)
	}
	r.releaseStream(st.topic)
}

// appendStream appends a message's record batch to a stream queue. It
// reports false, without error, when the queue was deleted meanwhile.
func (q *queue) appendStream(batch []byte) (bool, error) {
	if q.isDeleted() {
		return false, nil
	}
	if _, err := q.stream.Append(batch); err != nil {
		if q.isDeleted() {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (q *queue) isDeleted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleted
}

// streamLength is how many offsets a stream holds: what queue.declare-ok
// reports as its message count.
func (q *queue) streamLength() int {
	return int(max(q.stream.EndOffset()-q.stream.StartOffset(), 0))
}

// errStreamNotSupported is RabbitMQ's answer to basic.get and queue.purge
// on a stream: 540 NOT_IMPLEMENTED, which closes the connection.
func errStreamNotSupported(what, queue, vhost string) *Error {
	return amqpwire.Errorf(amqpwire.CodeNotImplemented, "%s not supported by stream queues %s", what, resource("queue", queue, vhost))
}
