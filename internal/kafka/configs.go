package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// Config metadata the broker core does not carry but Kafka's config APIs
// report: each topic config's type (DescribeConfigs v3+) and the broker
// config it falls back to (its synonym, DescribeConfigs v1+). Names the
// table does not know are reported as strings without a synonym.

type topicConfigInfo struct {
	typ           kmsg.ConfigType
	brokerSynonym string
}

var topicConfigInfos = map[string]topicConfigInfo{
	"cleanup.policy":                 {kmsg.ConfigTypeList, "log.cleanup.policy"},
	"compression.type":               {kmsg.ConfigTypeString, "compression.type"},
	"delete.retention.ms":            {kmsg.ConfigTypeLong, "log.cleaner.delete.retention.ms"},
	"file.delete.delay.ms":           {kmsg.ConfigTypeLong, "log.segment.delete.delay.ms"},
	"flush.messages":                 {kmsg.ConfigTypeLong, "log.flush.interval.messages"},
	"flush.ms":                       {kmsg.ConfigTypeLong, "log.flush.interval.ms"},
	"index.interval.bytes":           {kmsg.ConfigTypeInt, "log.index.interval.bytes"},
	"max.compaction.lag.ms":          {kmsg.ConfigTypeLong, "log.cleaner.max.compaction.lag.ms"},
	"max.message.bytes":              {kmsg.ConfigTypeInt, "message.max.bytes"},
	"message.timestamp.type":         {kmsg.ConfigTypeString, "log.message.timestamp.type"},
	"min.cleanable.dirty.ratio":      {kmsg.ConfigTypeDouble, "log.cleaner.min.cleanable.ratio"},
	"min.compaction.lag.ms":          {kmsg.ConfigTypeLong, "log.cleaner.min.compaction.lag.ms"},
	"min.insync.replicas":            {kmsg.ConfigTypeInt, "min.insync.replicas"},
	"preallocate":                    {kmsg.ConfigTypeBoolean, "log.preallocate"},
	"retention.bytes":                {kmsg.ConfigTypeLong, "log.retention.bytes"},
	"retention.ms":                   {kmsg.ConfigTypeLong, "log.retention.ms"},
	"segment.bytes":                  {kmsg.ConfigTypeInt, "log.segment.bytes"},
	"segment.index.bytes":            {kmsg.ConfigTypeInt, "log.index.size.max.bytes"},
	"segment.jitter.ms":              {kmsg.ConfigTypeLong, "log.roll.jitter.ms"},
	"segment.ms":                     {kmsg.ConfigTypeLong, "log.roll.ms"},
	"unclean.leader.election.enable": {kmsg.ConfigTypeBoolean, "unclean.leader.election.enable"},
}

func topicConfigType(name string) kmsg.ConfigType {
	if info, ok := topicConfigInfos[name]; ok {
		return info.typ
	}
	return kmsg.ConfigTypeString
}

// topicConfigSource is where a topic config's value comes from: a topic
// override, a broker setting given at start-up, or the default.
func topicConfigSource(e broker.ConfigEntry) kmsg.ConfigSource {
	switch {
	case !e.IsDefault:
		return kmsg.ConfigSourceDynamicTopicConfig
	case e.FromBroker:
		return kmsg.ConfigSourceStaticBrokerConfig
	}
	return kmsg.ConfigSourceDefaultConfig
}

// configValue is the reported value: null for sensitive configs.
func configValue(e broker.ConfigEntry) *string {
	if e.Sensitive {
		return nil
	}
	v := e.Value
	return &v
}

// createTopicsConfigs is a new topic's configuration as CreateTopics v5+
// reports it.
func createTopicsConfigs(entries []broker.ConfigEntry) []kmsg.CreateTopicsResponseTopicConfig {
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(entries))
	for _, e := range entries {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = e.Name
		c.Value = configValue(e)
		c.ReadOnly = e.ReadOnly
		c.Source = int8(topicConfigSource(e))
		c.IsSensitive = e.Sensitive
		out = append(out, c)
	}
	return out
}
