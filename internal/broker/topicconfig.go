package broker

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/wharf-mq/wharf/internal/seglog"
)

// ConfigEntry is one topic config as DescribeConfigs reports it.
type ConfigEntry struct {
	Name      string
	Value     string
	IsDefault bool
	ReadOnly  bool
	Sensitive bool
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

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		if slices.Contains(values, v) {
			return nil
		}
		return fmt.Errorf("%q is not one of %v", v, values)
	}
}

var topicConfigDefs = map[string]topicConfigDef{
	"cleanup.policy":         {defaultValue: "delete", check: oneOf("delete")},
	"retention.ms":           {defaultValue: "604800000", check: intAtLeast(-1)},
	"retention.bytes":        {defaultValue: "-1", check: intAtLeast(-1)},
	"segment.bytes":          {defaultValue: "1073741824", check: intAtLeast(14)},
	"segment.ms":             {defaultValue: "604800000", check: intAtLeast(1)},
	"index.interval.bytes":   {defaultValue: "4096", check: intAtLeast(0)},
	"max.message.bytes":      {defaultValue: strconv.Itoa(defaultMessageMaxBytes), check: intAtLeast(0)},
	"message.timestamp.type": {defaultValue: "CreateTime", check: oneOf("CreateTime", "LogAppendTime")},

	"compression.type":               {defaultValue: "producer", fixed: true},
	"min.insync.replicas":            {defaultValue: "1", fixed: true},
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
	return nil
}

// topicConfig is the effective configuration of a topic: defaults with the
// topic's overrides on top.
type topicConfig struct {
	overrides map[string]string
	defaults  map[string]string // broker-level defaults that differ from Kafka's
}

func (c topicConfig) value(name string) string {
	if v, ok := c.overrides[name]; ok {
		return v
	}
	if v, ok := c.defaults[name]; ok {
		return v
	}
	return topicConfigDefs[name].defaultValue
}

func (c topicConfig) int(name string) int64 {
	n, _ := strconv.ParseInt(c.value(name), 10, 64) // validated on the way in
	return n
}

func (c topicConfig) logAppendTime() bool {
	return c.value("message.timestamp.type") == "LogAppendTime"
}

func (c topicConfig) logConfig() seglog.Config {
	return seglog.Config{
		SegmentBytes:       c.int("segment.bytes"),
		SegmentMs:          c.int("segment.ms"),
		IndexIntervalBytes: int32(c.int("index.interval.bytes")),
		RetentionMs:        c.int("retention.ms"),
		RetentionBytes:     c.int("retention.bytes"),
	}
}

func (c topicConfig) entries() []ConfigEntry {
	names := slices.Sorted(maps.Keys(topicConfigDefs))
	out := make([]ConfigEntry, 0, len(names))
	for _, name := range names {
		_, overridden := c.overrides[name]
		out = append(out, ConfigEntry{
			Name:      name,
			Value:     c.value(name),
			IsDefault: !overridden,
			ReadOnly:  topicConfigDefs[name].fixed,
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
	return []ConfigEntry{
		entry("auto.create.topics.enable", strconv.FormatBool(*c.AutoCreateTopics), *c.AutoCreateTopics),
		entry("broker.id", strconv.Itoa(int(c.NodeID)), c.NodeID == 0),
		entry("log.dirs", c.DataDir, false),
		entry("log.flush.interval.ms", strconv.FormatInt(c.FlushInterval.Milliseconds(), 10), c.FlushInterval == defaultFlushInterval),
		entry("log.retention.bytes", topicConfigDefs["retention.bytes"].defaultValue, true),
		entry("log.retention.check.interval.ms", strconv.FormatInt(c.RetentionCheck.Milliseconds(), 10), c.RetentionCheck == defaultRetentionCheck),
		entry("log.retention.ms", topicConfigDefs["retention.ms"].defaultValue, true),
		entry("log.segment.bytes", topicConfigDefs["segment.bytes"].defaultValue, true),
		entry("message.max.bytes", strconv.Itoa(int(c.MessageMaxBytes)), c.MessageMaxBytes == defaultMessageMaxBytes),
		entry("node.id", strconv.Itoa(int(c.NodeID)), c.NodeID == 0),
		entry("num.partitions", strconv.Itoa(int(c.DefaultPartitions)), c.DefaultPartitions == 1),
		entry("wharf.fsync.policy", c.Fsync.String(), c.Fsync == FsyncOnAcksAll),
	}
}
