package metrics

import (
	"cmp"
	"slices"

	"github.com/wharf-mq/wharf/internal/group"
)

// groupSample and offsetSample are what one scrape read of a consumer
// group and of one partition it committed.
type groupSample struct {
	name    string
	members int
}

type offsetSample struct {
	group, topic   string
	partition      int32
	committed, lag int64
}

// writeGroups reads every group into s and writes kafka_exporter's
// consumer group families: members, and per partition committed its
// committed offset and lag in records, with their sums per topic
// (kafka_exporter reports no lag in time). Without a coordinator
// (groups nil) it writes none.
func writeGroups(e *exposition, groups *group.Coordinator, s *scratch) {
	if groups == nil {
		return
	}
	s.readGroups(groups)
	if len(s.groups) > 0 {
		e.family("kafka_consumergroup_members", "Amount of members in a consumer group", "gauge")
		for _, g := range s.groups {
			e.begin("kafka_consumergroup_members")
			e.label("consumergroup", g.name)
			e.end(int64(g.members))
		}
	}
	if len(s.offsets) == 0 {
		return
	}
	committed := func(o offsetSample) int64 { return o.committed }
	lag := func(o offsetSample) int64 { return o.lag }
	writeOffsetFamily(e, s.offsets, "kafka_consumergroup_current_offset", "Current Offset of a ConsumerGroup at Topic/Partition", committed)
	writeOffsetSumFamily(e, s.offsets, "kafka_consumergroup_current_offset_sum", "Current Offset of a ConsumerGroup at Topic for all partitions", committed)
	writeOffsetFamily(e, s.offsets, "kafka_consumergroup_lag", "Current Approximate Lag of a ConsumerGroup at Topic/Partition", lag)
	writeOffsetSumFamily(e, s.offsets, "kafka_consumergroup_lag_sum", "Current Approximate Lag of a ConsumerGroup at Topic for all partitions", lag)
}

func writeOffsetFamily(e *exposition, offsets []offsetSample, name, help string, value func(offsetSample) int64) {
	e.family(name, help, "gauge")
	for _, o := range offsets {
		e.begin(name)
		e.label("consumergroup", o.group)
		e.labelInt("partition", int64(o.partition))
		e.label("topic", o.topic)
		e.end(value(o))
	}
}

// writeOffsetSumFamily writes value summed over each group's partitions
// of a topic (offsets are sorted by group and topic).
func writeOffsetSumFamily(e *exposition, offsets []offsetSample, name, help string, value func(offsetSample) int64) {
	e.family(name, help, "gauge")
	for start := 0; start < len(offsets); {
		first, sum := offsets[start], int64(0)
		end := start
		for ; end < len(offsets) && offsets[end].group == first.group && offsets[end].topic == first.topic; end++ {
			sum += value(offsets[end])
		}
		e.begin(name)
		e.label("consumergroup", first.group)
		e.label("topic", first.topic)
		e.end(sum)
		start = end
	}
}

// readGroups fills s.groups and s.offsets, sorted by group, topic and
// partition. A group deleted meanwhile, and a partition whose lag cannot
// be read, are left out.
func (s *scratch) readGroups(groups *group.Coordinator) {
	listed := groups.ListGroups(nil, nil)
	names := make([]string, len(listed))
	for i, g := range listed {
		names[i] = g.Group
	}
	for _, d := range groups.DescribeGroups(names) {
		if d.Err != nil {
			continue
		}
		s.groups = append(s.groups, groupSample{name: d.Group, members: len(d.Members)})
		lags, err := groups.RecordLag(d.Group)
		if err != nil {
			continue
		}
		first := len(s.offsets)
		for _, l := range lags {
			if l.Err == nil {
				s.offsets = append(s.offsets, offsetSample{group: d.Group, topic: l.Topic, partition: l.Partition, committed: l.Committed, lag: l.Lag})
			}
		}
		slices.SortFunc(s.offsets[first:], func(a, b offsetSample) int {
			return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
		})
	}
}
