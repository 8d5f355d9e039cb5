package jetstream

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/subjects"
)

// StreamConfig is a stream's configuration, in nats-server's JSON shape:
// what STREAM.CREATE takes and STREAM.INFO shows. Mirrors, sources,
// subject transforms, republishing and the 2.11+ message features (TTLs,
// counters, schedules, batches) are refused (unsupportedStreamFeature).
type StreamConfig struct {
	Name           string               `json:"name"`
	Description    string               `json:"description,omitempty"`
	Subjects       []string             `json:"subjects,omitempty"`
	Retention      RetentionPolicy      `json:"retention"`
	MaxConsumers   int                  `json:"max_consumers"`
	MaxMsgs        int64                `json:"max_msgs"`
	MaxBytes       int64                `json:"max_bytes"`
	MaxAge         time.Duration        `json:"max_age"`
	MaxMsgsPer     int64                `json:"max_msgs_per_subject"`
	MaxMsgSize     int32                `json:"max_msg_size,omitempty"`
	Discard        DiscardPolicy        `json:"discard"`
	Storage        StorageType          `json:"storage"`
	Replicas       int                  `json:"num_replicas"`
	NoAck          bool                 `json:"no_ack,omitempty"`
	Duplicates     time.Duration        `json:"duplicate_window,omitempty"`
	Placement      json.RawMessage      `json:"placement,omitempty"`
	Compression    Compression          `json:"compression"`
	AllowDirect    bool                 `json:"allow_direct"`
	MirrorDirect   bool                 `json:"mirror_direct"`
	DiscardNewPer  bool                 `json:"discard_new_per_subject,omitempty"`
	Sealed         bool                 `json:"sealed"`
	DenyDelete     bool                 `json:"deny_delete"`
	DenyPurge      bool                 `json:"deny_purge"`
	AllowRollup    bool                 `json:"allow_rollup_hdrs"`
	ConsumerLimits StreamConsumerLimits `json:"consumer_limits"`
	AllowMsgTTL    bool                 `json:"allow_msg_ttl"`
	Metadata       map[string]string    `json:"metadata,omitempty"`

	// What Wharf does not implement: present in a request, refused.
	FirstSeq           uint64          `json:"first_seq,omitempty"`
	Mirror             json.RawMessage `json:"mirror,omitempty"`
	Sources            json.RawMessage `json:"sources,omitempty"`
	SubjectTransform   json.RawMessage `json:"subject_transform,omitempty"`
	RePublish          json.RawMessage `json:"republish,omitempty"`
	SubjectDeleteTTL   time.Duration   `json:"subject_delete_marker_ttl,omitempty"`
	AllowMsgCounter    bool            `json:"allow_msg_counter,omitempty"`
	AllowAtomicPublish bool            `json:"allow_atomic,omitempty"`
	AllowMsgSchedules  bool            `json:"allow_msg_schedules,omitempty"`
	AllowBatchPublish  bool            `json:"allow_batched,omitempty"`
}

// StreamConsumerLimits are the defaults and bounds a stream sets for its
// consumers.
type StreamConsumerLimits struct {
	InactiveThreshold time.Duration `json:"inactive_threshold,omitempty"`
	MaxAckPending     int           `json:"max_ack_pending,omitempty"`
}

// Limits of names and texts, nats-server's (JSMaxNameLen and the like),
// except that a stream's name is also part of its Kafka topic's
// (TopicName), which Kafka caps at 249 characters.
const (
	maxStreamNameLen   = 249 - len(topicPrefix)
	maxNameLen         = 255
	maxDescriptionLen  = 4 << 10
	maxMetadataLen     = 128 << 10
	defaultDuplicates  = 2 * time.Minute
	minAgeOrDuplicates = 100 * time.Millisecond
)

// topicPrefix begins the Kafka topic of every stream: stream ORDERS is
// the topic "js.ORDERS". A stream name cannot hold '.', so no stream's
// topic is any other's, and Kafka's collision rule (which equates '.' and
// '_') refuses a Kafka topic "js_ORDERS" while the stream exists, and the
// stream while such a topic exists.
const topicPrefix = "js."

// TopicName is the Kafka topic that holds stream's messages.
func TopicName(stream string) string { return topicPrefix + stream }

// validStreamName reports why name cannot name a stream, or nil. Beyond
// nats-server's rule (no '.', '*', '>', '\', '/' or white space) a name
// must fit in a Kafka topic name: ASCII letters, digits, '-' and '_'.
func validStreamName(name string) *APIError {
	if !validAssetName(name) {
		return ErrStreamInvalidConfig(`stream name is required and can not contain '.', '*', '>', '\', '/'`)
	}
	if len(name) > maxStreamNameLen {
		return ErrStreamInvalidConfig("stream name is too long, maximum allowed is %d", maxStreamNameLen)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return ErrStreamInvalidConfig("stream name %q can only hold ASCII letters, digits, '-' and '_' in Wharf (it names the Kafka topic %q)", name, TopicName(name))
		}
	}
	return nil
}

// validAssetName is nats-server's rule for stream and consumer names.
func validAssetName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\r\n\f.*>\\/")
}

// checkStreamConfig validates cfg and fills in nats-server's defaults, as
// STREAM.CREATE and STREAM.UPDATE do before anything else.
func checkStreamConfig(in StreamConfig) (StreamConfig, *APIError) {
	cfg := in
	cfg.Subjects = slices.Clone(in.Subjects)
	cfg.Metadata = maps.Clone(in.Metadata)
	if err := validStreamName(cfg.Name); err != nil {
		return cfg, err
	}
	if len(cfg.Description) > maxDescriptionLen {
		return cfg, ErrStreamInvalidConfig("stream description is too long, maximum allowed is %d", maxDescriptionLen)
	}
	if metadataLen(cfg.Metadata) > maxMetadataLen {
		return cfg, ErrStreamInvalidConfig("stream metadata exceeds maximum size of %d bytes", maxMetadataLen)
	}
	if err := unsupportedStreamFeature(cfg); err != nil {
		return cfg, err
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Replicas < 0 {
		return cfg, apiErr(400, 10133, "replicas count cannot be negative")
	}
	if cfg.Replicas > 1 {
		return cfg, ErrStreamReplicas
	}
	for _, limit := range []*int64{&cfg.MaxMsgs, &cfg.MaxMsgsPer, &cfg.MaxBytes} {
		if *limit == 0 || *limit < -1 {
			*limit = -1
		}
	}
	if cfg.MaxMsgSize == 0 || cfg.MaxMsgSize < -1 {
		cfg.MaxMsgSize = -1
	}
	if cfg.MaxConsumers == 0 || cfg.MaxConsumers < -1 {
		cfg.MaxConsumers = -1
	}
	if cfg.MaxAge < 0 {
		return cfg, ErrStreamInvalidConfig("max age can not be negative")
	}
	if cfg.MaxAge != 0 && cfg.MaxAge < minAgeOrDuplicates {
		return cfg, ErrStreamInvalidConfig("max age needs to be >= 100ms")
	}
	if cfg.Duplicates == 0 {
		cfg.Duplicates = defaultDuplicates
		if cfg.MaxAge != 0 && cfg.MaxAge < cfg.Duplicates {
			cfg.Duplicates = cfg.MaxAge
		}
	}
	if cfg.Duplicates < 0 {
		return cfg, ErrStreamInvalidConfig("duplicates window can not be negative")
	}
	if cfg.MaxAge != 0 && cfg.Duplicates > cfg.MaxAge {
		return cfg, ErrStreamInvalidConfig("duplicates window can not be larger then max age")
	}
	if cfg.Duplicates < minAgeOrDuplicates {
		return cfg, ErrStreamInvalidConfig("duplicates window needs to be >= 100ms")
	}
	if cfg.DenyPurge && cfg.AllowRollup {
		return cfg, ErrStreamInvalidConfig("roll-ups require the purge permission")
	}
	if cfg.DiscardNewPer {
		if cfg.Discard != DiscardNew {
			return cfg, ErrStreamInvalidConfig("discard new per subject requires discard new policy to be set")
		}
		if cfg.MaxMsgsPer <= 0 {
			return cfg, ErrStreamInvalidConfig("discard new per subject requires max msgs per subject > 0")
		}
	}
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = []string{cfg.Name}
	}
	seen := make(map[string]bool, len(cfg.Subjects))
	for i, subj := range cfg.Subjects {
		if !subjects.ValidPattern(subj) {
			return cfg, ErrStreamInvalidConfig("invalid subject")
		}
		if seen[subj] {
			return cfg, ErrStreamInvalidConfig("duplicate subjects detected")
		}
		seen[subj] = true
		if subj == ">" {
			return cfg, ErrStreamInvalidConfig("capturing all subjects requires no-ack to be true")
		}
		for _, reserved := range []string{"$JS.>", "$JSC.>", "$NRG.>"} {
			if subjectsCollide(subj, reserved) && !subsetMatch(subj, "$JS.EVENT.>") {
				return cfg, ErrStreamInvalidConfig("subjects that overlap with jetstream api require no-ack to be true")
			}
		}
		if subjectsCollide(subj, "$SYS.>") && !subsetMatch(subj, "$SYS.ACCOUNT.>") {
			return cfg, ErrStreamInvalidConfig("subjects that overlap with system api require no-ack to be true")
		}
		for _, other := range cfg.Subjects[i+1:] {
			if subjectsCollide(subj, other) {
				return cfg, ErrStreamInvalidConfig("subject %q overlaps with %q", subj, other)
			}
		}
	}
	return cfg, nil
}

// unsupportedStreamFeature refuses what Wharf's streams do not do, which
// nats-server would accept: a client that asks for it must not believe
// it has it.
func unsupportedStreamFeature(cfg StreamConfig) *APIError {
	var feature string
	switch {
	case len(cfg.Mirror) > 0 && string(cfg.Mirror) != "null":
		feature = "mirrors"
	case len(cfg.Sources) > 0 && string(cfg.Sources) != "null":
		feature = "sources"
	case len(cfg.SubjectTransform) > 0 && string(cfg.SubjectTransform) != "null":
		feature = "subject transforms"
	case len(cfg.RePublish) > 0 && string(cfg.RePublish) != "null":
		feature = "republish"
	case cfg.FirstSeq > 1:
		feature = "a first sequence"
	case cfg.AllowMsgTTL || cfg.SubjectDeleteTTL != 0:
		feature = "per-message TTLs"
	case cfg.AllowMsgCounter:
		feature = "message counters"
	case cfg.AllowAtomicPublish || cfg.AllowBatchPublish:
		feature = "batch publishing"
	case cfg.AllowMsgSchedules:
		feature = "message schedules"
	case cfg.NoAck:
		feature = "no-ack streams"
	default:
		return nil
	}
	return ErrStreamInvalidConfig("%s not supported by Wharf", feature)
}

// checkStreamUpdate checks that an update from old to cfg (both checked)
// changes only what nats-server lets an update change, and seals the
// stream as nats-server does if it asks to be: no message gets in or out
// any more.
func checkStreamUpdate(old StreamConfig, cfg *StreamConfig) *APIError {
	switch {
	case cfg.Name != old.Name:
		return ErrStreamInvalidConfig("stream configuration name must match original")
	case cfg.Storage != old.Storage:
		return ErrStreamInvalidConfig("stream configuration update can not change storage type")
	case cfg.Retention != old.Retention && (old.Retention == WorkQueuePolicy || cfg.Retention == WorkQueuePolicy):
		return ErrStreamInvalidConfig("stream configuration update can not change retention policy to/from workqueue")
	case !cfg.Sealed && old.Sealed:
		return ErrStreamInvalidConfig("stream configuration update can not unseal a sealed stream")
	case !cfg.DenyDelete && old.DenyDelete:
		return ErrStreamInvalidConfig("stream configuration update can not cancel deny message deletes")
	case !cfg.DenyPurge && old.DenyPurge:
		return ErrStreamInvalidConfig("stream configuration update can not cancel deny purge")
	}
	if cfg.Sealed {
		cfg.MaxAge, cfg.Discard, cfg.DenyDelete, cfg.DenyPurge, cfg.AllowRollup = 0, DiscardNew, true, true, false
	}
	return nil
}

// sameStreamConfig reports whether a create of cfg for an existing stream
// with config old is a no-op (nats-server answers it with the stream's
// info), both checked. The metadata nats-server adds itself is left out
// of the comparison.
func sameStreamConfig(old, cfg StreamConfig) bool {
	a, _ := json.Marshal(old)
	b, _ := json.Marshal(cfg)
	return string(a) == string(b)
}

func metadataLen(md map[string]string) int {
	n := 0
	for k, v := range md {
		n += len(k) + len(v)
	}
	return n
}

// RetentionPolicy says when a stream lets go of a message.
type RetentionPolicy int

const (
	// LimitsPolicy keeps messages until a limit (count, size, age, per
	// subject) removes them.
	LimitsPolicy RetentionPolicy = iota
	// InterestPolicy keeps a message while a consumer whose filter takes
	// it has not acknowledged it.
	InterestPolicy
	// WorkQueuePolicy removes a message once any consumer acknowledges it.
	WorkQueuePolicy
)

var retentionNames = []string{"limits", "interest", "workqueue"}

func (p RetentionPolicy) MarshalJSON() ([]byte, error) { return marshalEnum(retentionNames, int(p)) }
func (p *RetentionPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(retentionNames, b, (*int)(p))
}

// DiscardPolicy says what a full stream does with a new message.
type DiscardPolicy int

const (
	DiscardOld DiscardPolicy = iota // remove the oldest to make room
	DiscardNew                      // refuse the new one
)

var discardNames = []string{"old", "new"}

func (p DiscardPolicy) MarshalJSON() ([]byte, error) { return marshalEnum(discardNames, int(p)) }
func (p *DiscardPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(discardNames, b, (*int)(p))
}

// StorageType is the stream's storage as configured. Wharf keeps every
// stream in a log on disk: "memory" is accepted and shown as asked, and
// its messages are stored (and fsynced) like a file stream's.
type StorageType int

const (
	FileStorage StorageType = iota
	MemoryStorage
)

var storageNames = []string{"file", "memory"}

func (t StorageType) MarshalJSON() ([]byte, error) { return marshalEnum(storageNames, int(t)) }
func (t *StorageType) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(storageNames, b, (*int)(t))
}

// Compression is the stream's configured compression; its records are
// stored uncompressed whatever it says (the log's batches are what a
// Kafka consumer of the stream's topic reads).
type Compression int

var compressionNames = []string{"none", "s2"}

func (c Compression) MarshalJSON() ([]byte, error) { return marshalEnum(compressionNames, int(c)) }
func (c *Compression) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(compressionNames, b, (*int)(c))
}

func marshalEnum(names []string, v int) ([]byte, error) {
	if v < 0 || v >= len(names) {
		return nil, fmt.Errorf("can not marshal %d", v)
	}
	return json.Marshal(names[v])
}

// unmarshalEnum reads one of names, refusing others with nats-server's
// text.
func unmarshalEnum(names []string, b []byte, v *int) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if i := slices.Index(names, s); i >= 0 {
			*v = i
			return nil
		}
	}
	return fmt.Errorf("can not unmarshal %q", b)
}
