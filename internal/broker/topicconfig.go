package broker

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// ConfigEntry is one topic config as DescribeConfigs reports it.
type ConfigEntry struct {
	Name      string
	Value     string
	IsDefault bool
	// FromBroker marks a default that is a broker setting given at
	// start-up (Kafka's STATIC_BROKER_CONFIG source), not Kafka's own.
	FromBroker bool
	ReadOnly   bool
	Sensitive  bool
}

// topicConfigDef describes one topic-level config Wharf knows. Configs with
// a fixed value are Kafka settings that have only one meaning on a single
// node (or whose feature is not built yet): they are reported, and setting
// them to anything but that value is refused rather than silently ignored.
type topicConfigDef struct {
	defaultValue string
	fixed        bool
	check        func(string) error
}

func intAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		if n < min {
			return fmt.Errorf("%d is below the minimum %d", n, min)
		}
		return nil
	}
}

func ratio(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return fmt.Errorf("%q is not a number", v)
	}
	if f < 0 || f > 1 {
		return fmt.Errorf("%v is not between 0 and 1", f)
	}
	return nil
}

// cleanupPolicies are the values cleanup.policy may list, comma-separated.
var cleanupPolicies = []string{"delete", "compact"}

// policyList checks cleanup.policy: "delete", "compact", or both in either
// order ("compact,delete" as Kafka spells it).
func policyList(v string) error {
	items := splitList(v)
	if len(items) == 0 {
		return fmt.Errorf("%q names no policy; use delete, compact or compact,delete", v)
	}
	for _, item := range items {
		if !slices.Contains(cleanupPolicies, item) {
			return fmt.Errorf("%q is not one of %v", item, cleanupPolicies)
		}
	}
	return nil
}

// splitList splits a Kafka list config at commas, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		if slices.Contains(values, v) {
			return nil
		}
		return fmt.Errorf("%q is not one of %v", v, values)
	}
}

var topicConfigDefs = map[string]topicConfigDef{
	"cleanup.policy":         {defaultValue: "delete", check: policyList},
	"retention.ms":           {defaultValue: "604800000", check: intAtLeast(-1)},
	"retention.bytes":        {defaultValue: "-1", check: intAtLeast(-1)},
	"segment.bytes":          {defaultValue: "1073741824", check: intAtLeast(14)},
	"segment.ms":             {defaultValue: "604800000", check: intAtLeast(1)},
	"index.interval.bytes":   {defaultValue: "4096", check: intAtLeast(0)},
	"max.message.bytes":      {defaultValue: strconv.Itoa(defaultMessageMaxBytes), check: intAtLeast(0)},
	"message.timestamp.type": {defaultValue: "CreateTime", check: oneOf("CreateTime", "LogAppendTime")},

	// Compaction (cleanup.policy=compact); see replica.Config.
	"delete.retention.ms":       {defaultValue: "86400000", check: intAtLeast(0)},
	"min.cleanable.dirty.ratio": {defaultValue: "0.5", check: ratio},
	"min.compaction.lag.ms":     {defaultValue: "0", check: intAtLeast(0)},
	"max.compaction.lag.ms":     {defaultValue: strconv.FormatInt(math.MaxInt64, 10), check: intAtLeast(1)},

	// The default is per topic: min(2, replication factor), unless the
	// broker sets one (topicConfig.defaults).
	"min.insync.replicas": {defaultValue: "1", check: intAtLeast(1)},

	"compression.type":               {defaultValue: "producer", fixed: true},
	"unclean.leader.election.enable": {defaultValue: "false", fixed: true},
	"preallocate":                    {defaultValue: "false", fixed: true},
}

// validateTopicConfigs checks a set of overrides against topicConfigDefs.
func validateTopicConfigs(overrides map[string]string) error {
	for name, value := range overrides {
		def, ok := topicConfigDefs[name]
		if !ok {
			return fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, name)
		}
		if def.fixed {
			if value != def.defaultValue {
				return fmt.Errorf("%w: %s can only be %q on Wharf", ErrInvalidConfig, name, def.defaultValue)
			}
			continue
		}
		if err := def.check(value); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, name, err)
		}
	}
	c := topicConfig{overrides: overrides}
	if minLag, maxLag := c.int("min.compaction.lag.ms"), c.int("max.compaction.lag.ms"); minLag > maxLag {
		return fmt.Errorf("%w: min.compaction.lag.ms %d is greater than max.compaction.lag.ms %d", ErrInvalidConfig, minLag, maxLag)
	}
	return nil
}

// topicConfig is the effective configuration of a topic: defaults with the
// topic's overrides on top.
type topicConfig struct {
	overrides map[string]string
	defaults  map[string]topicDefault // broker-level defaults that differ from Kafka's
}

// topicDefault is a topic config's default that the broker sets: from a
// start-up setting (fromBroker), or worked out for the topic.
type topicDefault struct {
	value      string
	fromBroker bool
}

func (c topicConfig) value(name string) string {
	if v, ok := c.overrides[name]; ok {
		return v
	}
	if d, ok := c.defaults[name]; ok {
		return d.value
	}
	return topicConfigDefs[name].defaultValue
}

func (c topicConfig) int(name string) int64 {
	n, _ := strconv.ParseInt(c.value(name), 10, 64) // validated on the way in
	return n
}

func (c topicConfig) float(name string) float64 {
	f, _ := strconv.ParseFloat(c.value(name), 64) // validated on the way in
	return f
}

// compact reports whether cleanup.policy has "compact": the log cleaner
// compacts the topic and produced records must have keys.
func (c topicConfig) compact() bool {
	return slices.Contains(splitList(c.value("cleanup.policy")), "compact")
}

// deleteOld reports whether cleanup.policy has "delete": retention.ms and
// retention.bytes apply.
func (c topicConfig) deleteOld() bool {
	return slices.Contains(splitList(c.value("cleanup.policy")), "delete")
}

func (c topicConfig) logAppendTime() bool {
	return c.value("message.timestamp.type") == "LogAppendTime"
}

func (c topicConfig) logConfig() replica.Config {
	return replica.Config{
		SegmentBytes:       c.int("segment.bytes"),
		SegmentMs:          c.int("segment.ms"),
		IndexIntervalBytes: int32(c.int("index.interval.bytes")),
		RetentionMs:        c.int("retention.ms"),
		RetentionBytes:     c.int("retention.bytes"),

		Compact:                c.compact(),
		Delete:                 c.deleteOld(),
		DeleteRetentionMs:      c.int("delete.retention.ms"),
		MinCleanableDirtyRatio: c.float("min.cleanable.dirty.ratio"),
		MinCompactionLagMs:     c.int("min.compaction.lag.ms"),
		MaxCompactionLagMs:     c.int("max.compaction.lag.ms"),
		// Compaction keeps a producer's last sequence as long as the
		// partition's producer table remembers the producer.
		ProducerIDExpirationMs: defaultProducerIDExpirationMs,
	}
}

func (c topicConfig) entries() []ConfigEntry {
	names := slices.Sorted(maps.Keys(topicConfigDefs))
	out := make([]ConfigEntry, 0, len(names))
	for _, name := range names {
		_, overridden := c.overrides[name]
		out = append(out, ConfigEntry{
			Name:       name,
			Value:      c.value(name),
			IsDefault:  !overridden,
			FromBroker: !overridden && c.defaults[name].fromBroker,
			ReadOnly:   topicConfigDefs[name].fixed,
		})
	}
	return out
}

// Configs returns the broker-level settings in effect, under Kafka's names,
// for DescribeConfigs on the BROKER resource.
func (b *Broker) Configs() []ConfigEntry {
	c := b.cfg
	entry := func(name, value string, isDefault bool) ConfigEntry {
		return ConfigEntry{Name: name, Value: value, IsDefault: isDefault, ReadOnly: true}
	}
	entries := []ConfigEntry{
		entry("auto.create.topics.enable", strconv.FormatBool(*c.AutoCreateTopics), *c.AutoCreateTopics),
		entry("auto.leader.rebalance.enable", strconv.FormatBool(*c.AutoLeaderRebalance), *c.AutoLeaderRebalance),
		entry("broker.id", strconv.Itoa(int(c.NodeID)), c.NodeID == 0),
		entry("log.cleaner.backoff.ms", strconv.FormatInt(logCleanerBackoff.Milliseconds(), 10), true),
		entry("leader.imbalance.check.interval.seconds", strconv.FormatInt(int64(c.LeaderImbalanceCheck/time.Second), 10),
			c.LeaderImbalanceCheck == defaultLeaderImbalanceCheck),
		entry("log.dirs", c.DataDir, false),
		entry("log.flush.interval.ms", strconv.FormatInt(c.FlushInterval.Milliseconds(), 10), c.FlushInterval == defaultFlushInterval),
		entry("log.retention.bytes", topicConfigDefs["retention.bytes"].defaultValue, true),
		entry("log.retention.check.interval.ms", strconv.FormatInt(c.RetentionCheck.Milliseconds(), 10), c.RetentionCheck == defaultRetentionCheck),
		entry("log.retention.ms", topicConfigDefs["retention.ms"].defaultValue, true),
		entry("log.segment.bytes", topicConfigDefs["segment.bytes"].defaultValue, true),
		entry("message.max.bytes", strconv.Itoa(int(c.MessageMaxBytes)), c.MessageMaxBytes == defaultMessageMaxBytes),
		entry("node.id", strconv.Itoa(int(c.NodeID)), c.NodeID == 0),
		entry("num.partitions", strconv.Itoa(int(c.DefaultPartitions)), c.DefaultPartitions == 1),
		entry("wharf.fsync.policy", c.Fsync.String(), c.Fsync == replica.FsyncOnAcksAll),
	}
	if c.MinInsyncReplicas > 0 {
		// Unset, the default is per topic (topicDefaults): no one value.
		entries = append(entries, entry("min.insync.replicas", strconv.Itoa(c.MinInsyncReplicas), false))
	}
	return entries
}

// topicDefaults are the broker-level defaults of a topic of rf replicas:
// max.message.bytes from message.max.bytes, and min.insync.replicas from
// the broker's setting or, without one, min(2, rf): a single replica
// needs only itself, three tolerate one down.
func (b *Broker) topicDefaults(rf int) map[string]topicDefault {
	minISR := topicDefault{value: strconv.Itoa(min(2, rf))}
	if n := b.cfg.MinInsyncReplicas; n > 0 {
		minISR = topicDefault{value: strconv.Itoa(n), fromBroker: true}
	}
	return map[string]topicDefault{
		"max.message.bytes": {
			value:      strconv.Itoa(int(b.cfg.MessageMaxBytes)),
			fromBroker: b.cfg.MessageMaxBytes != defaultMessageMaxBytes,
		},
		"min.insync.replicas": minISR,
	}
}
