package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
)

// kafka_exporter's metrics, with its names, labels and meanings. On one
// node every partition has one replica, led by this broker, in sync.
var (
	kafkaBrokers    = prometheus.NewDesc("kafka_brokers", "Number of Brokers in the Kafka Cluster.", nil, nil)
	topicPartitions = prometheus.NewDesc("kafka_topic_partitions", "Number of partitions for this Topic", []string{"topic"}, nil)

	partitionLabels     = []string{"topic", "partition"}
	partitionCurrent    = prometheus.NewDesc("kafka_topic_partition_current_offset", "Current Offset of a Broker at Topic/Partition", partitionLabels, nil)
	partitionOldest     = prometheus.NewDesc("kafka_topic_partition_oldest_offset", "Oldest Offset of a Broker at Topic/Partition", partitionLabels, nil)
	partitionISR        = prometheus.NewDesc("kafka_topic_partition_in_sync_replica", "Number of In-Sync Replicas for this Topic/Partition", partitionLabels, nil)
	partitionLeader     = prometheus.NewDesc("kafka_topic_partition_leader", "Leader Broker ID of this Topic/Partition", partitionLabels, nil)
	partitionPreferred  = prometheus.NewDesc("kafka_topic_partition_leader_is_preferred", "1 if Topic/Partition is using the Preferred Broker", partitionLabels, nil)
	partitionReplicas   = prometheus.NewDesc("kafka_topic_partition_replicas", "Number of Replicas for this Topic/Partition", partitionLabels, nil)
	partitionUnderRepl  = prometheus.NewDesc("kafka_topic_partition_under_replicated_partition", "1 if Topic/Partition is under Replicated", partitionLabels, nil)
	offlinePartitions   = prometheus.NewDesc("wharf_offline_partitions", "Partitions whose log is out of service (could not be opened or found corrupt).", nil, nil)
	topicBytesIn        = prometheus.NewDesc("wharf_topic_bytes_in_total", "Record bytes appended to the topic since the broker started (Kafka's BytesInPerSec).", []string{"topic"}, nil)
	topicBytesOut       = prometheus.NewDesc("wharf_topic_bytes_out_total", "Record bytes Kafka consumers fetched from the topic since the broker started (Kafka's BytesOutPerSec).", []string{"topic"}, nil)
	groupPartitionLabel = []string{"consumergroup", "topic", "partition"}
	groupTopicLabels    = []string{"consumergroup", "topic"}
	groupCurrent        = prometheus.NewDesc("kafka_consumergroup_current_offset", "Current Offset of a ConsumerGroup at Topic/Partition", groupPartitionLabel, nil)
	groupCurrentSum     = prometheus.NewDesc("kafka_consumergroup_current_offset_sum", "Current Offset of a ConsumerGroup at Topic for all partitions", groupTopicLabels, nil)
	groupLag            = prometheus.NewDesc("kafka_consumergroup_lag", "Current Approximate Lag of a ConsumerGroup at Topic/Partition", groupPartitionLabel, nil)
	groupLagSum         = prometheus.NewDesc("kafka_consumergroup_lag_sum", "Current Approximate Lag of a ConsumerGroup at Topic for all partitions", groupTopicLabels, nil)
	groupMembers        = prometheus.NewDesc("kafka_consumergroup_members", "Amount of members in a consumer group", []string{"consumergroup"}, nil)
)

// kafkaCollector reads topics, partitions and groups at scrape time.
type kafkaCollector struct {
	broker *broker.Broker
	groups *group.Coordinator
}

func (c *kafkaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{kafkaBrokers, topicPartitions, partitionCurrent, partitionOldest, partitionISR,
		partitionLeader, partitionPreferred, partitionReplicas, partitionUnderRepl, offlinePartitions, topicBytesIn, topicBytesOut,
		groupCurrent, groupCurrentSum, groupLag, groupLagSum, groupMembers} {
		ch <- d
	}
}

func (c *kafkaCollector) Collect(ch chan<- prometheus.Metric) {
	gauge(ch, kafkaBrokers, 1)
	leader := float64(c.broker.NodeID())
	offline := 0
	for _, t := range c.broker.Topics() {
		name := t.Name()
		parts := t.Partitions()
		gauge(ch, topicPartitions, float64(len(parts)), name)
		var in, out int64
		for _, p := range parts {
			in += p.BytesIn()
			out += p.BytesOut()
			if p.Offline() != nil {
				offline++
				continue
			}
			index := strconv.Itoa(int(p.Index()))
			gauge(ch, partitionCurrent, float64(p.HighWatermark()), name, index)
			gauge(ch, partitionOldest, float64(p.StartOffset()), name, index)
			gauge(ch, partitionISR, 1, name, index)
			gauge(ch, partitionLeader, leader, name, index)
			gauge(ch, partitionPreferred, 1, name, index)
			gauge(ch, partitionReplicas, 1, name, index)
			gauge(ch, partitionUnderRepl, 0, name, index)
		}
		counter(ch, topicBytesIn, float64(in), name)
		counter(ch, topicBytesOut, float64(out), name)
	}
	gauge(ch, offlinePartitions, float64(offline))
	c.collectGroups(ch)
}

// collectGroups reports every group's members and, per partition it has
// committed, its committed offset and lag in records (kafka_exporter
// reports no lag in time).
func (c *kafkaCollector) collectGroups(ch chan<- prometheus.Metric) {
	listed := c.groups.ListGroups(nil, nil)
	names := make([]string, len(listed))
	for i, g := range listed {
		names[i] = g.Group
	}
	for _, d := range c.groups.DescribeGroups(names) {
		if d.Err != nil {
			continue
		}
		gauge(ch, groupMembers, float64(len(d.Members)), d.Group)
		lags, err := c.groups.RecordLag(d.Group)
		if err != nil {
			continue
		}
		type sums struct{ current, lag int64 }
		perTopic := map[string]*sums{}
		for _, l := range lags {
			if l.Err != nil {
				continue
			}
			index := strconv.Itoa(int(l.Partition))
			gauge(ch, groupCurrent, float64(l.Committed), d.Group, l.Topic, index)
			gauge(ch, groupLag, float64(l.Lag), d.Group, l.Topic, index)
			s := perTopic[l.Topic]
			if s == nil {
				s = &sums{}
				perTopic[l.Topic] = s
			}
			s.current += l.Committed
			s.lag += l.Lag
		}
		for topic, s := range perTopic {
			gauge(ch, groupCurrentSum, float64(s.current), d.Group, topic)
			gauge(ch, groupLagSum, float64(s.lag), d.Group, topic)
		}
	}
}
