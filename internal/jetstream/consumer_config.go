package jetstream

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/wharf-mq/wharf/internal/subjects"
)

// ConsumerConfig is a consumer's configuration in nats-server's JSON shape.
// A consumer with a DeliverSubject is a push consumer; without, a pull
// consumer. Rate limits, sampling, replay at the original pace, priority
// groups and pausing are refused (unsupportedConsumerFeature).
type ConsumerConfig struct {
	Durable        string          `json:"durable_name,omitempty"`
	Name           string          `json:"name,omitempty"`
	Description    string          `json:"description,omitempty"`
	DeliverPolicy  DeliverPolicy   `json:"deliver_policy"`
	OptStartSeq    uint64          `json:"opt_start_seq,omitempty"`
	OptStartTime   *time.Time      `json:"opt_start_time,omitempty"`
	AckPolicy      AckPolicy       `json:"ack_policy"`
	AckWait        time.Duration   `json:"ack_wait,omitempty"`
	MaxDeliver     int             `json:"max_deliver,omitempty"`
	BackOff        []time.Duration `json:"backoff,omitempty"`
	FilterSubject  string          `json:"filter_subject,omitempty"`
	FilterSubjects []string        `json:"filter_subjects,omitempty"`
	ReplayPolicy   ReplayPolicy    `json:"replay_policy"`
	MaxWaiting     int             `json:"max_waiting,omitempty"`
	MaxAckPending  int             `json:"max_ack_pending,omitempty"`
	FlowControl    bool            `json:"flow_control,omitempty"`
	HeadersOnly    bool            `json:"headers_only,omitempty"`

	MaxRequestBatch    int           `json:"max_batch,omitempty"`
	MaxRequestExpires  time.Duration `json:"max_expires,omitempty"`
	MaxRequestMaxBytes int           `json:"max_bytes,omitempty"`

	DeliverSubject string        `json:"deliver_subject,omitempty"`
	DeliverGroup   string        `json:"deliver_group,omitempty"`
	Heartbeat      time.Duration `json:"idle_heartbeat,omitempty"`

	InactiveThreshold time.Duration     `json:"inactive_threshold,omitempty"`
	Replicas          int               `json:"num_replicas"`
	MemoryStorage     bool              `json:"mem_storage,omitempty"`
	Metadata          map[string]string `json:"metadata,omitempty"`

	// What Wharf does not implement: present in a request, refused.
	RateLimit       uint64          `json:"rate_limit_bps,omitempty"`
	SampleFrequency string          `json:"sample_freq,omitempty"`
	Direct          bool            `json:"direct,omitempty"`
	PauseUntil      *time.Time      `json:"pause_until,omitempty"`
	PriorityGroups  []string        `json:"priority_groups,omitempty"`
	PriorityPolicy  json.RawMessage `json:"priority_policy,omitempty"`
	PinnedTTL       time.Duration   `json:"priority_timeout,omitempty"`
}

// nats-server's consumer defaults.
const (
	defaultAckWait           = 30 * time.Second
	defaultMaxAckPending     = 1000
	defaultMaxWaiting        = 512
	defaultInactiveThreshold = 5 * time.Second
	minHeartbeat             = 100 * time.Millisecond
)

// push reports whether the consumer pushes to a deliver subject.
func (c *ConsumerConfig) push() bool { return c.DeliverSubject != "" }

// durable reports whether the consumer outlives its clients.
func (c *ConsumerConfig) durable() bool { return c.Durable != "" }

// filter is the consumer's subject filter.
func (c *ConsumerConfig) filter() filter {
	if c.FilterSubject != "" {
		return filter{c.FilterSubject}
	}
	return filter(c.FilterSubjects)
}

// setConsumerDefaults fills in nats-server's defaults, given the stream's
// configuration.
func setConsumerDefaults(c *ConsumerConfig, stream *StreamConfig) {
	if c.MaxDeliver == 0 || c.MaxDeliver < -1 {
		c.MaxDeliver = -1
	}
	c.MaxWaiting = max(c.MaxWaiting, 0)
	if c.MaxAckPending < -1 {
		c.MaxAckPending = -1
	}
	c.MaxRequestBatch = max(c.MaxRequestBatch, 0)
	c.MaxRequestExpires = max(c.MaxRequestExpires, 0)
	c.MaxRequestMaxBytes = max(c.MaxRequestMaxBytes, 0)
	c.Heartbeat = max(c.Heartbeat, 0)
	c.InactiveThreshold = max(c.InactiveThreshold, 0)
	if !c.push() && c.MaxWaiting == 0 {
		c.MaxWaiting = defaultMaxWaiting
	}
	if c.AckWait == 0 && c.AckPolicy != AckNone {
		c.AckWait = defaultAckWait
	}
	if len(c.BackOff) > 0 {
		c.AckWait = c.BackOff[0]
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = stream.ConsumerLimits.MaxAckPending
	}
	if c.InactiveThreshold == 0 {
		c.InactiveThreshold = stream.ConsumerLimits.InactiveThreshold
	}
	if c.MaxAckPending == 0 && c.AckPolicy != AckNone {
		c.MaxAckPending = defaultMaxAckPending
	}
	if !c.durable() && c.InactiveThreshold == 0 {
		c.InactiveThreshold = defaultInactiveThreshold
	}
}

// checkConsumerConfig validates a consumer configuration with its
// defaults set against its stream's, as nats-server's checkConsumerCfg.
func checkConsumerConfig(c *ConsumerConfig, stream *StreamConfig) *APIError {
	if c.Name != "" && !validAssetName(c.Name) {
		return ErrStreamInvalidConfig(`consumer name can not contain '.', '*', '>', '\', '/'`)
	}
	if c.Durable != "" && !validAssetName(c.Durable) {
		return ErrStreamInvalidConfig(`consumer durable name can not contain '.', '*', '>', '\', '/'`)
	}
	if len(c.Name) > maxNameLen || len(c.Durable) > maxNameLen {
		return apiErr(400, 10102, "consumer name is too long, maximum allowed is %d", maxNameLen)
	}
	if err := unsupportedConsumerFeature(c); err != nil {
		return err
	}
	if c.Replicas < 0 {
		return apiErr(400, 10133, "replicas count cannot be negative")
	}
	if c.Replicas > stream.Replicas {
		return apiErr(400, 10126, "consumer config replica count exceeds parent stream")
	}
	for _, b := range c.BackOff {
		if b < 0 {
			return ErrConsumerBackoffNegative
		}
	}
	if c.AckWait < 0 {
		return ErrConsumerAckWaitNegative
	}
	if n := len(c.BackOff); n > 0 && c.MaxDeliver != -1 && n > c.MaxDeliver {
		return ErrConsumerMaxDeliverBackoff
	}
	if len(c.Description) > maxDescriptionLen {
		return apiErr(400, 10107, "consumer description is too long, maximum allowed is %d", maxDescriptionLen)
	}
	if c.push() {
		if !literal(c.DeliverSubject) {
			return ErrConsumerDeliverWildcards
		}
		if !subjects.ValidLiteral(c.DeliverSubject) {
			return apiErr(400, 10112, "invalid push consumer deliver subject")
		}
		for _, subj := range stream.Subjects {
			if subjectsCollide(subj, c.DeliverSubject) {
				return ErrConsumerDeliverCycle
			}
		}
		if c.MaxWaiting != 0 {
			return ErrConsumerPushMaxWaiting
		}
		if c.MaxAckPending > 0 && c.AckPolicy == AckNone {
			return ErrConsumerMaxPendingAck
		}
		if c.Heartbeat > 0 && c.Heartbeat < minHeartbeat {
			return ErrConsumerSmallHeartbeat
		}
	} else {
		if c.AckPolicy == AckNone && stream.Retention == WorkQueuePolicy {
			return ErrConsumerPullWQAck
		}
		if c.Heartbeat > 0 {
			return ErrConsumerHBRequiresPush
		}
		if c.FlowControl {
			return ErrConsumerFCRequiresPush
		}
		if c.MaxRequestExpires != 0 && c.MaxRequestExpires < time.Millisecond {
			return ErrConsumerMaxExpiresSmall
		}
	}
	if limit := stream.ConsumerLimits.MaxAckPending; limit > 0 && c.MaxAckPending > limit {
		return apiErr(400, 10121, "consumer max ack pending exceeds system limit of %d", limit)
	}
	if limit := stream.ConsumerLimits.InactiveThreshold; limit > 0 && c.InactiveThreshold > limit {
		return apiErr(400, 10153, "consumer inactive threshold exceeds system limit of %v", limit)
	}
	if c.FilterSubject != "" && len(c.FilterSubjects) > 0 {
		return ErrConsumerBothFilters
	}
	for _, f := range c.FilterSubjects {
		if f == "" {
			return ErrConsumerEmptyFilter
		}
	}
	filters := c.filter()
	for i, f := range filters {
		if !subjects.ValidPattern(f) {
			return ErrStreamInvalidConfig("invalid subject")
		}
		for j, g := range filters {
			if i != j && subsetMatch(f, g) {
				return ErrConsumerFiltersOverlap
			}
		}
	}
	if err := checkDeliverPolicy(c); err != nil {
		return err
	}
	if c.FlowControl && c.Heartbeat == 0 {
		return ErrConsumerFCNeedsHeartbeat
	}
	if c.Durable != "" && c.Name != "" && c.Name != c.Durable {
		return ErrConsumerNameMismatch
	}
	if metadataLen(c.Metadata) > maxMetadataLen {
		return apiErr(400, 10135, "consumer metadata exceeds maximum size of %dKB", maxMetadataLen>>10)
	}
	return nil
}

// checkDeliverPolicy checks that the start options suit the deliver
// policy, with nats-server's texts.
func checkDeliverPolicy(c *ConsumerConfig) *APIError {
	badStart := func(dp, start string) *APIError {
		return ErrConsumerInvalidPolicy("consumer delivery policy is deliver %s, but optional start %s is also set", dp, start)
	}
	notSet := func(dp, what string) *APIError {
		return ErrConsumerInvalidPolicy("consumer delivery policy is deliver %s, but optional %s is not set", dp, what)
	}
	name := deliverPolicyTexts[c.DeliverPolicy]
	switch c.DeliverPolicy {
	case DeliverAll, DeliverLast, DeliverNew, DeliverLastPerSubject:
		if c.OptStartSeq > 0 {
			return badStart(name, "sequence")
		}
		if c.OptStartTime != nil {
			return badStart(name, "time")
		}
		if c.DeliverPolicy == DeliverLastPerSubject && len(c.filter()) == 0 {
			return notSet(name, "filter subject")
		}
	case DeliverByStartSequence:
		if c.OptStartSeq == 0 {
			return notSet(name, "start sequence")
		}
		if c.OptStartTime != nil {
			return badStart(name, "time")
		}
	case DeliverByStartTime:
		if c.OptStartTime == nil {
			return notSet(name, "start time")
		}
		if c.OptStartSeq != 0 {
			return badStart(name, "start sequence")
		}
	}
	return nil
}

var deliverPolicyTexts = map[DeliverPolicy]string{
	DeliverAll: "all", DeliverLast: "last", DeliverNew: "new", DeliverByStartSequence: "by start sequence",
	DeliverByStartTime: "by start time", DeliverLastPerSubject: "last per subject",
}

// unsupportedConsumerFeature refuses what Wharf's consumers do not do.
func unsupportedConsumerFeature(c *ConsumerConfig) *APIError {
	var feature string
	switch {
	case c.RateLimit > 0:
		feature = "rate limits"
	case c.SampleFrequency != "":
		feature = "sampling"
	case c.ReplayPolicy == ReplayOriginal:
		feature = "replay at the original rate"
	case c.Direct:
		feature = "direct consumers"
	case c.PauseUntil != nil && c.PauseUntil.After(time.Now()):
		feature = "pausing"
	case len(c.PriorityGroups) > 0 || (len(c.PriorityPolicy) > 0 && string(c.PriorityPolicy) != `"none"` && string(c.PriorityPolicy) != "null"):
		feature = "priority groups"
	default:
		return nil
	}
	return ErrStreamInvalidConfig("consumer %s not supported by Wharf", feature)
}

// checkConsumerUpdate checks that an update from old to c changes only
// what nats-server lets an update change.
func checkConsumerUpdate(old, c *ConsumerConfig) error {
	switch {
	case old.DeliverPolicy != c.DeliverPolicy:
		return errors.New("deliver policy can not be updated")
	case old.MemoryStorage != c.MemoryStorage:
		return errors.New("storage type can not be updated")
	case old.OptStartSeq != c.OptStartSeq:
		return errors.New("start sequence can not be updated")
	case (old.OptStartTime == nil) != (c.OptStartTime == nil) ||
		old.OptStartTime != nil && !old.OptStartTime.Equal(*c.OptStartTime):
		return errors.New("start time can not be updated")
	case old.AckPolicy != c.AckPolicy:
		return errors.New("ack policy can not be updated")
	case old.ReplayPolicy != c.ReplayPolicy:
		return errors.New("replay policy can not be updated")
	case old.Heartbeat != c.Heartbeat:
		return errors.New("heart beats can not be updated")
	case old.FlowControl != c.FlowControl:
		return errors.New("flow control can not be updated")
	case old.push() && !c.push():
		return errors.New("can not update push consumer to pull based")
	case !old.push() && c.push():
		return errors.New("can not update pull consumer to push based")
	case old.MaxWaiting != c.MaxWaiting:
		return errors.New("max waiting can not be updated")
	}
	return nil
}

// sameConsumerConfig reports whether two checked configurations are the
// same (a create of an existing consumer with its own config is a no-op).
func sameConsumerConfig(a, b *ConsumerConfig) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func cloneConsumerConfig(c ConsumerConfig) ConsumerConfig {
	c.BackOff = slices.Clone(c.BackOff)
	c.FilterSubjects = slices.Clone(c.FilterSubjects)
	c.Metadata = maps.Clone(c.Metadata)
	if c.OptStartTime != nil {
		t := *c.OptStartTime
		c.OptStartTime = &t
	}
	return c
}

// DeliverPolicy says where a new consumer starts.
type DeliverPolicy int

const (
	DeliverAll DeliverPolicy = iota
	DeliverLast
	DeliverNew
	DeliverByStartSequence
	DeliverByStartTime
	DeliverLastPerSubject
)

var deliverNames = []string{"all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"}

func (p DeliverPolicy) MarshalJSON() ([]byte, error) { return marshalEnum(deliverNames, int(p)) }
func (p *DeliverPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(deliverNames, b, (*int)(p))
}

// AckPolicy says which deliveries a client acknowledges.
type AckPolicy int

const (
	AckNone     AckPolicy = iota // none: delivered is done
	AckAll                       // one ack settles every delivery up to it
	AckExplicit                  // every delivery is acknowledged by itself
)

var ackNames = []string{"none", "all", "explicit"}

func (p AckPolicy) MarshalJSON() ([]byte, error)  { return marshalEnum(ackNames, int(p)) }
func (p *AckPolicy) UnmarshalJSON(b []byte) error { return unmarshalEnum(ackNames, b, (*int)(p)) }

// ReplayPolicy says at what pace stored messages are delivered; Wharf
// delivers them as fast as the consumer takes them (instant).
type ReplayPolicy int

const (
	ReplayInstant ReplayPolicy = iota
	ReplayOriginal
)

var replayNames = []string{"instant", "original"}

func (p ReplayPolicy) MarshalJSON() ([]byte, error) { return marshalEnum(replayNames, int(p)) }
func (p *ReplayPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(replayNames, b, (*int)(p))
}
