package group

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/record"
)

// ListedGroup is one group as ListGroups reports it.
type ListedGroup struct {
	Group        string
	ProtocolType string
	State        string
	Type         string // "classic" or "consumer"
}

// ListGroups lists the groups whose state and type are in the filters
// (compared case-insensitively; an empty filter passes everything).
func (c *Coordinator) ListGroups(states, types []string) []ListedGroup {
	var out []ListedGroup
	for _, g := range c.snapshot() {
		g.mu.Lock()
		lg := ListedGroup{Group: g.name, ProtocolType: g.protocolType(), State: g.state(), Type: g.kind.String()}
		removed := g.removed
		g.mu.Unlock()
		if removed || !matchesFilter(states, lg.State) || !matchesFilter(types, lg.Type) {
			continue
		}
		out = append(out, lg)
	}
	slices.SortFunc(out, func(a, b ListedGroup) int { return cmp.Compare(a.Group, b.Group) })
	return out
}

func matchesFilter(filter []string, v string) bool {
	if len(filter) == 0 {
		return true
	}
	return slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
}

// DescribedMember is one member as DescribeGroups reports it.
type DescribedMember struct {
	MemberID   string
	InstanceID *string
	ClientID   string
	ClientHost string
	Metadata   []byte
	Assignment []byte
}

// DescribedGroup is one group as DescribeGroups reports it.
type DescribedGroup struct {
	Group        string
	Err          error // ErrGroupIDNotFound (state "Dead") for an unknown group
	State        string
	ProtocolType string
	Protocol     string
	Members      []DescribedMember
}

// DescribeGroups describes groups in the classic shape. A KIP-848 group is
// shown as Kafka shows it to old tools: protocol type "consumer", its
// assignor as the protocol, and each member's subscription and assignment
// encoded as a classic consumer's would be.
func (c *Coordinator) DescribeGroups(names []string) []DescribedGroup {
	out := make([]DescribedGroup, len(names))
	for i, name := range names {
		out[i] = DescribedGroup{Group: name}
		err := c.withGroup(name, false, func(g *group) {
			if g.kind == kindConsumer {
				out[i] = g.describeConsumerAsClassic()
			} else {
				out[i] = g.describeClassic()
			}
		})
		if err != nil {
			out[i].Err, out[i].State = err, "Dead"
		}
	}
	return out
}

func (g *group) describeClassic() DescribedGroup {
	cg := &g.classic
	d := DescribedGroup{Group: g.name, State: cg.state.String(), ProtocolType: cg.protocolType}
	stable := cg.state == classicStable
	if stable {
		d.Protocol = cg.protocol
	}
	for _, m := range cg.membersInJoinOrder() {
		dm := DescribedMember{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
		if stable {
			// Metadata and assignments mean something only for a
			// complete generation, so Kafka shows them only then.
			dm.Metadata = m.metadataFor(cg.protocol)
			dm.Assignment = m.assignment
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

func (g *group) describeConsumerAsClassic() DescribedGroup {
	cg := &g.consumer
	d := DescribedGroup{Group: g.name, State: cg.stateName(), ProtocolType: "consumer", Protocol: cg.assignor}
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = g.subscribedNames(m)
		asg := kmsg.NewConsumerMemberAssignment()
		for _, t := range m.assigned.toTopicPartitions() {
			if name, ok := topicName(g.c.cfg.Broker, t.TopicID); ok {
				at := kmsg.NewConsumerMemberAssignmentTopic()
				at.Topic, at.Partitions = name, t.Partitions
				asg.Topics = append(asg.Topics, at)
			}
		}
		d.Members = append(d.Members, DescribedMember{
			MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			Metadata: meta.AppendTo(nil), Assignment: asg.AppendTo(nil),
		})
	}
	return d
}

// subscribedNames are the existing topics a member's subscription covers.
func (g *group) subscribedNames(m *consumerMember) []string {
	var names []string
	for name := range g.consumer.topics {
		if m.sub.subscribes(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// AssignedTopic is a KIP-848 assignment of one topic.
type AssignedTopic struct {
	TopicID    [16]byte
	Topic      string // "" if the topic no longer exists
	Partitions []int32
}

// ConsumerMemberDescription is one KIP-848 member.
type ConsumerMemberDescription struct {
	MemberID         string
	InstanceID       *string
	RackID           *string
	MemberEpoch      int32
	ClientID         string
	ClientHost       string
	SubscribedTopics []string
	SubscribedRegex  *string
	Assignment       []AssignedTopic
	TargetAssignment []AssignedTopic
}

// ConsumerGroupDescription is one group as ConsumerGroupDescribe reports it.
type ConsumerGroupDescription struct {
	Group           string
	Err             error
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ConsumerMemberDescription
}

// DescribeConsumerGroups describes KIP-848 groups. A classic group is
// GROUP_ID_NOT_FOUND here, as in Kafka.
func (c *Coordinator) DescribeConsumerGroups(names []string) []ConsumerGroupDescription {
	out := make([]ConsumerGroupDescription, len(names))
	for i, name := range names {
		out[i] = ConsumerGroupDescription{Group: name}
		err := c.withGroup(name, false, func(g *group) {
			if g.kind != kindConsumer {
				out[i].Err = fmt.Errorf("%w: group %q is not a consumer group", ErrGroupIDNotFound, name)
				return
			}
			out[i] = g.describeConsumer()
		})
		if err != nil {
			out[i].Err = err
		}
	}
	return out
}

func (g *group) describeConsumer() ConsumerGroupDescription {
	cg := &g.consumer
	d := ConsumerGroupDescription{
		Group: g.name, State: cg.stateName(), Epoch: cg.epoch, AssignmentEpoch: cg.assignmentEpoch, Assignor: cg.assignor,
	}
	if d.Assignor == "" {
		d.Assignor = AssignorUniform
	}
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		md := ConsumerMemberDescription{
			MemberID: m.id, InstanceID: m.instanceID, RackID: m.rackID, MemberEpoch: m.epoch,
			ClientID: m.clientID, ClientHost: m.clientHost,
			SubscribedTopics: m.sub.topics,
			Assignment:       g.named(m.assigned), TargetAssignment: g.named(m.target),
		}
		if md.SubscribedTopics == nil {
			md.SubscribedTopics = []string{}
		}
		if m.sub.regex != "" {
			md.SubscribedRegex = &m.sub.regex
		}
		if m.leftStatic {
			md.MemberEpoch = -2
		}
		d.Members = append(d.Members, md)
	}
	return d
}

func (g *group) named(s partitionSet) []AssignedTopic {
	var out []AssignedTopic
	for _, t := range s.toTopicPartitions() {
		name, _ := topicName(g.c.cfg.Broker, t.TopicID)
		out = append(out, AssignedTopic{TopicID: t.TopicID, Topic: name, Partitions: t.Partitions})
	}
	return out
}

// DeleteGroups deletes empty groups and their offsets; one error (or nil)
// per group, in order.
func (c *Coordinator) DeleteGroups(names []string) []error {
	out := make([]error, len(names))
	for i, name := range names {
		if err := validGroupID(name, true); err != nil {
			out[i] = err
			continue
		}
		err := c.withGroup(name, false, func(g *group) { out[i] = g.delete() })
		if err != nil {
			out[i] = err
		}
	}
	return out
}

func (g *group) delete() error {
	if (g.kind == kindConsumer && len(g.consumer.members) > 0) || (g.kind == kindClassic && len(g.classic.members) > 0) {
		return fmt.Errorf("%w: group %q has members", ErrNonEmptyGroup, g.name)
	}
	recs := g.metadataTombstones()
	for topic, ps := range g.offsets {
		for p := range ps {
			recs = append(recs, record.Record{Key: offsetKey(g.name, topic, p)})
		}
	}
	if err := g.write(recs, true); err != nil {
		return err
	}
	g.c.log.Info("group deleted", "group", g.name)
	g.markRemoved()
	return nil
}
