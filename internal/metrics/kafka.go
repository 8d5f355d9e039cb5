package metrics

import (
	"slices"

	"github.com/wharf-mq/wharf/internal/broker"
)

// kafka_exporter's topic and partition families, with its names, labels
// and meanings, and Wharf's bytes per topic. On one node every partition
// has one replica, led by this broker, in sync; in a cluster each node
// reports the partitions it holds a replica of, with their offsets as its
// replica has them (per replica, as Kafka's kafka_log_log_size) and their
// leader and in-sync replicas as it sees them.
type partitionFamily struct {
	name, help string
	value      func(p partitionSample) int64
}

var partitionFamilies = []partitionFamily{
	{"kafka_topic_partition_current_offset", "Current Offset of a Broker at Topic/Partition",
		func(p partitionSample) int64 { return p.current }},
	{"kafka_topic_partition_oldest_offset", "Oldest Offset of a Broker at Topic/Partition",
		func(p partitionSample) int64 { return p.oldest }},
	{"kafka_topic_partition_in_sync_replica", "Number of In-Sync Replicas for this Topic/Partition",
		func(p partitionSample) int64 { return p.inSync }},
	{"kafka_topic_partition_leader", "Leader Broker ID of this Topic/Partition",
		func(p partitionSample) int64 { return p.leader }},
	{"kafka_topic_partition_leader_is_preferred", "1 if Topic/Partition is using the Preferred Broker",
		func(p partitionSample) int64 { return int64(boolValue(p.leader == p.preferred)) }},
	{"kafka_topic_partition_replicas", "Number of Replicas for this Topic/Partition",
		func(p partitionSample) int64 { return p.replicas }},
	{"kafka_topic_partition_under_replicated_partition", "1 if Topic/Partition is under Replicated",
		func(p partitionSample) int64 { return int64(boolValue(p.inSync < p.replicas)) }},
}

// topicSample and partitionSample are what one scrape read of a topic
// and of an online partition, each under the object's own short locks.
type topicSample struct {
	name              string
	partitions        int
	bytesIn, bytesOut int64
}

type partitionSample struct {
	topic           string
	index           int32
	current, oldest int64
	// leader is -1 while none is known; preferred is the first replica.
	leader, preferred, inSync, replicas int64
}

// writeKafka reads every topic and partition into s and writes
// kafka_exporter's broker, topic and partition families, and Wharf's
// bytes per topic and offline partitions.
func writeKafka(e *exposition, b *broker.Broker, s *scratch) {
	offline := s.readKafka(b)
	e.family("kafka_brokers", "Number of Brokers in the Kafka Cluster.", "gauge")
	e.sample("kafka_brokers", int64(max(len(b.Brokers()), 1))) // none listed on a single node
	e.family("wharf_offline_partitions", "Partitions whose log is out of service (could not be opened or found corrupt).", "gauge")
	e.sample("wharf_offline_partitions", int64(offline))
	if len(s.topics) == 0 {
		return
	}
	writeTopicFamily(e, s.topics, "kafka_topic_partitions", "Number of partitions for this Topic", "gauge",
		func(t topicSample) int64 { return int64(t.partitions) })
	writeTopicFamily(e, s.topics, "wharf_topic_bytes_in_total", "Record bytes appended to the topic since the broker started (Kafka's BytesInPerSec).", "counter",
		func(t topicSample) int64 { return t.bytesIn })
	writeTopicFamily(e, s.topics, "wharf_topic_bytes_out_total", "Record bytes Kafka consumers fetched from the topic since the broker started (Kafka's BytesOutPerSec).", "counter",
		func(t topicSample) int64 { return t.bytesOut })
	if len(s.partitions) == 0 {
		return
	}
	for _, f := range partitionFamilies {
		e.family(f.name, f.help, "gauge")
		for _, p := range s.partitions {
			e.begin(f.name)
			e.labelInt("partition", int64(p.index))
			e.label("topic", p.topic)
			e.end(f.value(p))
		}
	}
}

func writeTopicFamily(e *exposition, topics []topicSample, name, help, kind string, value func(topicSample) int64) {
	e.family(name, help, kind)
	for _, t := range topics {
		e.begin(name)
		e.label("topic", t.name)
		e.end(value(t))
	}
}

// readKafka fills s.topics and s.partitions (online partitions this node
// holds a replica of) and returns how many of those are offline.
func (s *scratch) readKafka(b *broker.Broker) (offline int) {
	self := b.NodeID()
	for _, t := range b.Topics() {
		ts := topicSample{name: t.Name()}
		parts := t.Partitions()
		ts.partitions = len(parts)
		for _, p := range parts {
			replicas := p.Replicas() // nil on a single node
			if replicas != nil && !slices.Contains(replicas, self) {
				continue
			}
			ts.bytesIn += p.BytesIn()
			ts.bytesOut += p.BytesOut()
			if p.Offline() != nil {
				offline++
				continue
			}
			ps := partitionSample{topic: ts.name, index: p.Index(), current: p.HighWatermark(), oldest: p.StartOffset(),
				leader: int64(self), preferred: int64(self), inSync: 1, replicas: 1} // a single node's one replica
			if replicas != nil { // read in a cluster only: Leadership allocates its ISR
				leader, _, isr := p.Leadership(self)
				ps.leader, ps.preferred, ps.inSync, ps.replicas = int64(leader), int64(replicas[0]), int64(len(isr)), int64(len(replicas))
			}
			s.partitions = append(s.partitions, ps)
		}
		s.topics = append(s.topics, ts)
	}
	return offline
}
