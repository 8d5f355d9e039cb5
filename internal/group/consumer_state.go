package group

import (
	"bytes"
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
)

// topicPartition is one partition of a topic, by topic id.
type topicPartition struct {
	topic     [16]byte
	partition int32
}

// partitionSet is a set of partitions.
type partitionSet map[topicPartition]struct{}

func (s partitionSet) has(tp topicPartition) bool { _, ok := s[tp]; return ok }

// toTopicPartitions lists the set by topic, sorted.
func (s partitionSet) toTopicPartitions() []TopicPartitions {
	byTopic := map[[16]byte][]int32{}
	for tp := range s {
		byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
	}
	out := make([]TopicPartitions, 0, len(byTopic))
	for _, id := range slices.SortedFunc(maps.Keys(byTopic), func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }) {
		out = append(out, TopicPartitions{TopicID: id, Partitions: slices.Sorted(slices.Values(byTopic[id]))})
	}
	return out
}

func fromTopicPartitions(tps []TopicPartitions) partitionSet {
	s := partitionSet{}
	for _, t := range tps {
		for _, p := range t.Partitions {
			s[topicPartition{t.TopicID, p}] = struct{}{}
		}
	}
	return s
}

// containsAll reports whether every listed partition is in the set.
func (s partitionSet) containsAll(tps []TopicPartitions) bool {
	for _, t := range tps {
		for _, p := range t.Partitions {
			if !s.has(topicPartition{t.TopicID, p}) {
				return false
			}
		}
	}
	return true
}

// equalTo reports whether the listed partitions are exactly the set.
func (s partitionSet) equalTo(tps []TopicPartitions) bool {
	other := fromTopicPartitions(tps)
	return len(other) == len(s) && s.containsAll(tps)
}

// intersects reports whether any listed partition is in the set.
func (s partitionSet) intersects(tps []TopicPartitions) bool {
	for _, t := range tps {
		for _, p := range t.Partitions {
			if s.has(topicPartition{t.TopicID, p}) {
				return true
			}
		}
	}
	return false
}

// memberState is where a KIP-848 member is on its way to its target.
type memberState int8

const (
	memberStable     memberState = iota // owns its target (or all of it that is free)
	memberUnrevoked                     // must give up partitions before it gets new ones
	memberUnreleased                    // waits for partitions other members still hold
)

// consumerMember is one member of a KIP-848 group.
type consumerMember struct {
	id         string
	instanceID *string
	rackID     *string
	clientID   string
	clientHost string

	rebalanceTimeout time.Duration
	sub              subscription

	epoch, previousEpoch int32
	state                memberState
	// assigned is what the member owns; revoking what it was told to give
	// up and has not confirmed yet. Both are reserved for it.
	assigned, revoking partitionSet
	// assignedAt is the epoch at which each assigned partition was given,
	// which bounds the epochs its offset commits may carry (KIP-1251).
	assignedAt map[topicPartition]int32
	target     partitionSet

	sessionDeadline time.Time
	revokeDeadline  time.Time // while revoking
	// leftStatic: a static member left with epoch -2; its partitions wait
	// for it until its session times out.
	leftStatic bool
}

// takeOver gives m what old (a previous incarnation of the same static
// member) held.
func (m *consumerMember) takeOver(old *consumerMember, cg *consumerGroup) {
	m.assigned, m.revoking, m.assignedAt = old.assigned, partitionSet{}, old.assignedAt
	for tp := range old.revoking {
		if cg.owner[tp] == old.id {
			delete(cg.owner, tp)
		}
	}
	for tp := range m.assigned {
		cg.owner[tp] = m.id
	}
	m.epoch, m.previousEpoch = old.epoch, old.previousEpoch
}

// consumerGroup is the state of the KIP-848 protocol.
type consumerGroup struct {
	epoch           int32 // group epoch: bumped by every change to members or subscriptions
	assignmentEpoch int32 // epoch of the target assignment
	assignor        string
	members         map[string]*consumerMember
	static          map[string]string // instance id -> member id
	// owner is who holds each partition (assigned or revoking); a
	// partition with no owner may be given to its target member.
	owner map[topicPartition]string
	// topics is the subscribed topics' metadata the target was computed
	// from; a change (a new partition, a matching topic) bumps the epoch.
	topics map[string]topicMeta
}

// topicMeta is a topic as the assignors see it.
type topicMeta struct {
	id         [16]byte
	partitions int32
}

func (cg *consumerGroup) init() {
	*cg = consumerGroup{
		members: map[string]*consumerMember{},
		static:  map[string]string{},
		owner:   map[topicPartition]string{},
	}
}

// stateName is the group state as Kafka names a consumer group's.
func (cg *consumerGroup) stateName() string {
	if len(cg.members) == 0 {
		return "Empty"
	}
	if cg.assignmentEpoch != cg.epoch {
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignmentEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

func (cg *consumerGroup) nextDeadline() time.Time {
	var next time.Time
	for _, m := range cg.members {
		for _, t := range []time.Time{m.sessionDeadline, m.revokeDeadline} {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next
}

// releaseAll frees everything a member holds.
func (g *group) releaseAll(m *consumerMember) {
	cg := &g.consumer
	for _, set := range []partitionSet{m.assigned, m.revoking} {
		for tp := range set {
			if cg.owner[tp] == m.id {
				delete(cg.owner, tp)
			}
		}
	}
	m.assigned, m.revoking = partitionSet{}, partitionSet{}
	m.revokeDeadline = time.Time{}
}

// releaseRevoking frees the partitions a member was revoking.
func (g *group) releaseRevoking(m *consumerMember) {
	for tp := range m.revoking {
		if g.consumer.owner[tp] == m.id {
			delete(g.consumer.owner, tp)
		}
	}
	m.revoking = partitionSet{}
	m.revokeDeadline = time.Time{}
	if m.state == memberUnrevoked {
		m.state = memberStable
	}
}

// reconcile moves a member towards its target assignment, given what it
// says it owns (nil: not said). A member first gives up what it must
// revoke; only when it confirms does it advance to the target epoch and
// get the partitions that are free. Partitions still held by others come
// on later heartbeats. It reports whether the member's assignment or epoch
// changed.
func (g *group) reconcile(m *consumerMember, owned []TopicPartitions, now time.Time) bool {
	cg := &g.consumer
	changed := false
	if m.state == memberUnrevoked {
		if owned == nil || m.revoking.intersects(owned) {
			return false
		}
		g.releaseRevoking(m)
		changed = true
	}
	if m.state == memberStable && m.epoch == cg.assignmentEpoch {
		return changed
	}

	revoke := partitionSet{}
	for tp := range m.assigned {
		if !m.target.has(tp) {
			revoke[tp] = struct{}{}
		}
	}
	if len(revoke) > 0 {
		for tp := range revoke {
			delete(m.assigned, tp)
			delete(m.assignedAt, tp)
		}
		m.revoking = revoke
		m.state = memberUnrevoked
		m.revokeDeadline = now.Add(m.rebalanceTimeout)
		return true
	}

	waiting := 0
	for tp := range m.target {
		if m.assigned.has(tp) {
			continue
		}
		if owner, held := cg.owner[tp]; held && owner != m.id {
			waiting++
			continue
		}
		cg.owner[tp] = m.id
		m.assigned[tp] = struct{}{}
		m.assignedAt[tp] = cg.assignmentEpoch
		changed = true
	}
	if m.epoch != cg.assignmentEpoch {
		m.previousEpoch, m.epoch = m.epoch, cg.assignmentEpoch
		changed = true
	}
	m.state = memberStable
	if waiting > 0 {
		m.state = memberUnreleased
	}
	return changed
}

// subscribedTopics resolves every member's subscription against the
// broker's topics. A regex is matched against every topic, internal ones
// included, as Kafka's coordinator matches it against every topic of its
// metadata image: a member whose regex names __consumer_offsets gets it.
func (g *group) subscribedTopics() map[string]topicMeta {
	out := map[string]topicMeta{}
	b := g.c.cfg.Broker
	hasRegex := false
	for _, m := range g.consumer.members {
		for _, name := range m.sub.topics {
			if _, done := out[name]; done {
				continue
			}
			if t, err := b.Topic(name); err == nil {
				out[name] = metaOf(t)
			}
		}
		hasRegex = hasRegex || m.sub.re != nil
	}
	if hasRegex {
		for _, t := range b.Topics() {
			if _, done := out[t.Name()]; done {
				continue
			}
			for _, m := range g.consumer.members {
				if m.sub.re != nil && m.sub.re.MatchString(t.Name()) {
					out[t.Name()] = metaOf(t)
					break
				}
			}
		}
	}
	return out
}

func metaOf(t *broker.Topic) topicMeta {
	return topicMeta{id: t.ID(), partitions: int32(len(t.Partitions()))}
}

// consumerMetadataCurrent reports whether the subscribed topics are as the
// current target assignment saw them.
func (g *group) consumerMetadataCurrent() bool {
	return maps.Equal(g.subscribedTopics(), g.consumer.topics)
}

// computeTargetAssignment runs the group's assignor over the members and
// their subscribed topics.
func (g *group) computeTargetAssignment() {
	cg := &g.consumer
	cg.topics = g.subscribedTopics()
	cg.assignor = cg.preferredAssignor()
	members := make([]assignorMember, 0, len(cg.members))
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		am := assignorMember{id: id, topics: map[string]bool{}, previous: m.target}
		for name := range cg.topics {
			if m.sub.subscribes(name) {
				am.topics[name] = true
			}
		}
		members = append(members, am)
	}
	var target map[string]partitionSet
	if cg.assignor == AssignorRange {
		target = assignRange(members, cg.topics)
	} else {
		target = assignUniform(members, cg.topics)
	}
	for id, m := range cg.members {
		m.target = target[id]
		if m.target == nil {
			m.target = partitionSet{}
		}
	}
}

// preferredAssignor is the assignor most members ask for (ties: the
// alphabetically first), "uniform" when none asks.
func (cg *consumerGroup) preferredAssignor() string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.sub.assignor != "" {
			votes[m.sub.assignor]++
		}
	}
	best, bestVotes := AssignorUniform, 0
	for _, name := range slices.Sorted(maps.Keys(votes)) {
		if votes[name] > bestVotes {
			best, bestVotes = name, votes[name]
		}
	}
	return best
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.SortedFunc(maps.Keys(m), cmp.Compare[string])
}
