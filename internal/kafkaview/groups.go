package kafkaview

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// GroupSummary is one consumer group as the group list shows it.
type GroupSummary struct {
	Group        string `json:"group"`
	Type         string `json:"type"` // classic or consumer (KIP-848)
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Members      int    `json:"members"`
	// Lag is the records behind, summed over the partitions the group
	// has committed offsets for.
	Lag int64 `json:"lag"`
}

// Member is one member of a group with the partitions assigned to it.
type Member struct {
	MemberID   string            `json:"member_id"`
	InstanceID string            `json:"instance_id,omitempty"`
	ClientID   string            `json:"client_id"`
	ClientHost string            `json:"client_host"`
	Assignment []TopicPartitions `json:"assignment"`
}

// TopicPartitions names partitions of one topic.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// PartitionLag is how far a group is behind on one partition: in records,
// and in time, the age of the first record it has not consumed.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	End       int64  `json:"end_offset"`
	Lag       int64  `json:"lag"`
	// LagMs is the age of the next record to consume (0 when caught
	// up); NextTimestamp its timestamp in ms (0 when caught up).
	LagMs         int64  `json:"lag_ms"`
	NextTimestamp int64  `json:"next_timestamp"`
	Error         string `json:"error,omitempty"`
}

// GroupDetail is one group with its members and its lag per partition.
type GroupDetail struct {
	GroupSummary
	Protocol   string         `json:"protocol"`
	MemberList []Member       `json:"member_list"`
	Partitions []PartitionLag `json:"partitions"`
}

// Groups lists every group this node's coordinator knows, with its lag
// in records: none while it is not open. In a cluster that is the groups
// whose __consumer_offsets partition this node leads, as a Kafka broker's
// ListGroups answers.
func (v *View) Groups() []GroupSummary {
	groups, err := v.groups()
	if err != nil {
		return []GroupSummary{}
	}
	listed := groups.ListGroups(nil, nil)
	names := make([]string, len(listed))
	for i, g := range listed {
		names[i] = g.Group
	}
	described := groups.DescribeGroups(names)
	out := make([]GroupSummary, 0, len(listed))
	for i, g := range listed {
		s := GroupSummary{Group: g.Group, Type: g.Type, State: g.State, ProtocolType: g.ProtocolType, Members: len(described[i].Members)}
		lags, _ := groups.RecordLag(g.Group)
		for _, l := range lags {
			s.Lag += max(l.Lag, 0)
		}
		out = append(out, s)
	}
	return out
}

// Group describes one group: its members with their assignments, and its
// lag per committed partition in records and in time.
func (v *View) Group(name string) (GroupDetail, error) {
	groups, err := v.groups()
	if err != nil {
		return GroupDetail{}, err
	}
	d := groups.DescribeGroups([]string{name})[0]
	if errors.Is(d.Err, group.ErrGroupIDNotFound) {
		return GroupDetail{}, fmt.Errorf("%w: no group %q", ErrNotFound, name)
	}
	if d.Err != nil {
		return GroupDetail{}, d.Err
	}
	out := GroupDetail{
		GroupSummary: GroupSummary{Group: name, State: d.State, ProtocolType: d.ProtocolType, Members: len(d.Members)},
		Protocol:     d.Protocol, MemberList: []Member{}, Partitions: []PartitionLag{},
	}
	for _, g := range groups.ListGroups(nil, nil) {
		if g.Group == name {
			out.Type = g.Type
		}
	}
	for _, m := range d.Members {
		member := Member{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assignment: assignment(d.ProtocolType, m.Assignment)}
		if m.InstanceID != nil {
			member.InstanceID = *m.InstanceID
		}
		out.MemberList = append(out.MemberList, member)
	}
	lags, err := groups.Lag(name)
	if err != nil {
		return out, err
	}
	for _, l := range lags {
		pl := PartitionLag{Topic: l.Topic, Partition: l.Partition, Committed: l.Committed, End: l.End, Lag: l.Lag, LagMs: l.TimeLag.Milliseconds()}
		if !l.NextTimestamp.IsZero() {
			pl.NextTimestamp = l.NextTimestamp.UnixMilli()
		}
		if l.Err != nil {
			pl.Error = l.Err.Error()
		}
		out.Lag += max(l.Lag, 0)
		out.Partitions = append(out.Partitions, pl)
	}
	slices.SortFunc(out.Partitions, func(a, b PartitionLag) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

// assignment decodes a member's assignment when the group speaks the
// consumer protocol (any other protocol's bytes mean nothing here).
func assignment(protocolType string, b []byte) []TopicPartitions {
	out := []TopicPartitions{}
	if protocolType != "consumer" || len(b) == 0 {
		return out
	}
	var a kmsg.ConsumerMemberAssignment
	if a.ReadFrom(b) != nil {
		return out
	}
	for _, t := range a.Topics {
		out = append(out, TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
	}
	return out
}
