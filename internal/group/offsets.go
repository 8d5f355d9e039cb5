package group

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/record"
)

// OffsetCommit is one offset to commit.
type OffsetCommit struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// CommitRequest is an OffsetCommit request.
type CommitRequest struct {
	Group string
	// Generation is the classic generation or the KIP-848 member epoch;
	// with an empty MemberID, a negative value commits as an admin tool
	// (allowed only while the group is empty).
	Generation int32
	MemberID   string
	InstanceID *string
	Offsets    []OffsetCommit
}

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// FetchRequest is an OffsetFetch request for one group.
type FetchRequest struct {
	Group string
	// Partitions to fetch; nil means every committed offset.
	Partitions []TopicPartition
	// MemberID and MemberEpoch (OffsetFetch v9+) are checked for KIP-848
	// groups when MemberID is set.
	MemberID    *string
	MemberEpoch int32
	// RequireStable asks for UNSTABLE_OFFSET_COMMIT on partitions with
	// offsets pending in an undecided transaction.
	RequireStable bool
}

// FetchedOffset is one committed offset; Offset is -1 when there is none.
type FetchedOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	Err         error
}

// CommitOffsets stores offsets durably. The result has one error (or nil)
// per offset, in order.
func (c *Coordinator) CommitOffsets(req CommitRequest) []error {
	return c.commitOffsets(offsetCommit{
		group:      req.Group,
		emptyGroup: true,
		// Only a commit from outside the group may create it (Kafka's
		// "simple" groups of admin tools and self-assigning consumers).
		create:  req.Generation < 0 && req.MemberID == "",
		member:  &req,
		offsets: req.Offsets,
		write:   func(g *group, recs []record.Record) error { return g.write(recs, true) },
		apply: func(g *group, tp TopicPartition, o committedOffset) {
			g.setOffset(tp.Topic, tp.Partition, o)
		},
	})
}

// offsetCommit is one OffsetCommit or TxnOffsetCommit, as far as the path
// they share needs to know.
type offsetCommit struct {
	group      string
	emptyGroup bool // "" is a valid group id (OffsetCommit, for old clients)
	create     bool // the group is created if it does not exist
	// member is checked with validateCommit; nil skips the check.
	member  *CommitRequest
	offsets []OffsetCommit
	// write appends the records of the accepted offsets to the group's
	// partition; apply then records each of them in the group.
	write func(g *group, recs []record.Record) error
	apply func(g *group, tp TopicPartition, o committedOffset)
}

// commitOffsets checks the group id, every offset's partition and
// metadata, and the committing member, then writes the offsets that passed
// as one batch and applies them. The result has one error (or nil) per
// offset, in order.
func (c *Coordinator) commitOffsets(oc offsetCommit) []error {
	results := make([]error, len(oc.offsets))
	if err := validGroupID(oc.group, oc.emptyGroup); err != nil {
		failRemaining(results, err)
		return results
	}
	for i, o := range oc.offsets {
		results[i] = c.checkOffset(o)
	}
	err := c.withGroup(oc.group, oc.create, func(g *group) { g.commitOffsets(oc, results) })
	if errors.Is(err, ErrGroupIDNotFound) {
		err = fmt.Errorf("%w: group %q does not exist", ErrIllegalGeneration, oc.group)
	}
	if err != nil {
		failRemaining(results, err)
	}
	return results
}

// failRemaining gives err to every offset that has not failed yet.
func failRemaining(results []error, err error) {
	for i := range results {
		if results[i] == nil {
			results[i] = err
		}
	}
}

// checkOffset checks what an offset to commit says on its own: its
// partition exists and its metadata is not too large.
func (c *Coordinator) checkOffset(o OffsetCommit) error {
	if err := c.checkPartition(o.Topic, o.Partition); err != nil {
		return err
	}
	if len(o.Metadata) > c.cfg.OffsetMetadataMaxBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrOffsetMetadataTooLarge, len(o.Metadata), c.cfg.OffsetMetadataMaxBytes)
	}
	return nil
}

// checkPartition reports whether a partition exists.
func (c *Coordinator) checkPartition(topic string, partition int32) error {
	t, err := c.cfg.Broker.Topic(topic)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnknownTopicOrPartition, err)
	}
	if _, err := t.Partition(partition); err != nil {
		return fmt.Errorf("%w: %v", ErrUnknownTopicOrPartition, err)
	}
	return nil
}

// commitOffsets is the part of a commit done holding the group: the
// member check, then the write of every offset still without an error.
func (g *group) commitOffsets(oc offsetCommit, results []error) {
	now := g.now()
	var partitionCheck func(topic string, partition int32) error
	if oc.member != nil {
		var err error
		if partitionCheck, err = g.validateCommit(*oc.member, now); err != nil {
			failRemaining(results, err)
			return
		}
	}
	var recs []record.Record
	var accepted []int
	for i, o := range oc.offsets {
		if results[i] != nil {
			continue
		}
		if partitionCheck != nil {
			if results[i] = partitionCheck(o.Topic, o.Partition); results[i] != nil {
				continue
			}
		}
		recs = append(recs, record.Record{Key: offsetKey(g.name, o.Topic, o.Partition), Value: offsetValue(committed(o, now))})
		accepted = append(accepted, i)
	}
	if len(recs) == 0 {
		return
	}
	if err := oc.write(g, recs); err != nil {
		for _, i := range accepted {
			results[i] = err
		}
		return
	}
	for _, i := range accepted {
		o := oc.offsets[i]
		oc.apply(g, TopicPartition{o.Topic, o.Partition}, committed(o, now))
	}
}

// committed is o as stored, committed at now.
func committed(o OffsetCommit, now time.Time) committedOffset {
	return committedOffset{offset: o.Offset, leaderEpoch: o.LeaderEpoch, metadata: o.Metadata, committedAt: now}
}

// validateCommit checks that a commit comes from a current member (or an
// admin while the group is empty). For KIP-848 members at an older epoch it
// returns a per-partition check instead: a member may commit at the epoch
// a partition was assigned at or later (KIP-1251).
func (g *group) validateCommit(req CommitRequest, now time.Time) (func(topic string, partition int32) error, error) {
	admin := req.Generation < 0 && req.MemberID == ""
	if g.kind == kindConsumer {
		cg := &g.consumer
		if admin {
			if len(cg.members) > 0 {
				return nil, fmt.Errorf("%w: group %q has members; only they may commit", ErrUnknownMemberID, g.name)
			}
			return nil, nil
		}
		m := cg.members[req.MemberID]
		switch {
		case m == nil:
			return nil, fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, req.MemberID, g.name)
		case req.Generation > m.epoch:
			return nil, fmt.Errorf("%w: epoch %d, the member is at %d", ErrFencedMemberEpoch, req.Generation, m.epoch)
		case req.Generation == m.epoch:
			return nil, nil
		}
		return func(topic string, partition int32) error {
			t, err := g.c.cfg.Broker.Topic(topic)
			if err == nil {
				tp := topicPartition{t.ID(), partition}
				if at, ok := m.assignedAt[tp]; ok && at <= req.Generation {
					return nil
				}
			}
			return fmt.Errorf("%w: epoch %d, the member is at %d", ErrStaleMemberEpoch, req.Generation, m.epoch)
		}, nil
	}

	cg := &g.classic
	if admin && req.InstanceID == nil {
		if len(cg.members) > 0 {
			return nil, fmt.Errorf("%w: group %q has members; only they may commit", ErrUnknownMemberID, g.name)
		}
		return nil, nil
	}
	if req.InstanceID != nil {
		if err := cg.checkInstance(*req.InstanceID, req.MemberID); err != nil {
			return nil, err
		}
	}
	m := cg.members[req.MemberID]
	switch {
	case m == nil:
		return nil, fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, req.MemberID, g.name)
	case req.Generation != cg.generation:
		return nil, fmt.Errorf("%w: generation %d, the group is at %d", ErrIllegalGeneration, req.Generation, cg.generation)
	case cg.state == classicCompletingRebalance:
		return nil, ErrRebalanceInProgress
	}
	if !m.waiting() {
		m.sessionDeadline = now.Add(m.sessionTimeout)
	}
	return nil, nil
}

func (g *group) setOffset(topic string, partition int32, o committedOffset) {
	ps := g.offsets[topic]
	if ps == nil {
		ps = map[int32]committedOffset{}
		g.offsets[topic] = ps
	}
	ps[partition] = o
}

func (g *group) deleteOffset(topic string, partition int32) {
	if ps := g.offsets[topic]; ps != nil {
		delete(ps, partition)
		if len(ps) == 0 {
			delete(g.offsets, topic)
		}
	}
}

// FetchOffsets returns committed offsets. A group that does not exist has
// none: every asked partition comes back with offset -1, as in Kafka.
func (c *Coordinator) FetchOffsets(req FetchRequest) ([]FetchedOffset, error) {
	if err := validGroupID(req.Group, true); err != nil {
		return nil, err
	}
	var out []FetchedOffset
	var groupErr error
	err := c.withGroup(req.Group, false, func(g *group) {
		if groupErr = g.validateFetch(req); groupErr == nil {
			out = g.fetch(req.Partitions)
			if req.RequireStable {
				g.markUnstable(out)
			}
		}
	})
	switch {
	case errors.Is(err, ErrGroupIDNotFound):
		out = noOffsets(req.Partitions)
	case err != nil:
		return nil, err
	}
	return out, groupErr
}

// validateFetch checks the member of an OffsetFetch v9+ from a KIP-848
// consumer.
func (g *group) validateFetch(req FetchRequest) error {
	if g.kind != kindConsumer || req.MemberID == nil {
		return nil
	}
	m := g.consumer.members[*req.MemberID]
	switch {
	case m == nil:
		return fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, *req.MemberID, g.name)
	case req.MemberEpoch != m.epoch:
		return fmt.Errorf("%w: epoch %d, the member is at %d", ErrStaleMemberEpoch, req.MemberEpoch, m.epoch)
	}
	return nil
}

func (g *group) fetch(tps []TopicPartition) []FetchedOffset {
	if tps == nil {
		var out []FetchedOffset
		for _, topic := range slices.Sorted(maps.Keys(g.offsets)) {
			ps := g.offsets[topic]
			for _, p := range slices.SortedFunc(maps.Keys(ps), cmp.Compare[int32]) {
				o := ps[p]
				out = append(out, FetchedOffset{Topic: topic, Partition: p, Offset: o.offset, LeaderEpoch: o.leaderEpoch, Metadata: o.metadata})
			}
		}
		return out
	}
	out := noOffsets(tps)
	for i, tp := range tps {
		if o, ok := g.offsets[tp.Topic][tp.Partition]; ok {
			out[i].Offset, out[i].LeaderEpoch, out[i].Metadata = o.offset, o.leaderEpoch, o.metadata
		}
	}
	return out
}

func noOffsets(tps []TopicPartition) []FetchedOffset {
	out := make([]FetchedOffset, len(tps))
	for i, tp := range tps {
		out[i] = FetchedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: -1, LeaderEpoch: -1}
	}
	return out
}

// DeleteOffsets removes committed offsets (OffsetDelete). Offsets of topics
// the group's members consume are kept (GROUP_SUBSCRIBED_TO_TOPIC); a
// classic group with members of a protocol type other than "consumer" has
// subscriptions the broker cannot read, so nothing is deleted from it
// (NON_EMPTY_GROUP). The result has one error per partition.
func (c *Coordinator) DeleteOffsets(groupID string, tps []TopicPartition) ([]error, error) {
	if err := validGroupID(groupID, true); err != nil {
		return nil, err
	}
	results := make([]error, len(tps))
	for i, tp := range tps {
		results[i] = c.checkPartition(tp.Topic, tp.Partition)
	}
	var groupErr error
	err := c.withGroup(groupID, false, func(g *group) { groupErr = g.deleteOffsets(tps, results) })
	if err != nil {
		return nil, err
	}
	return results, groupErr
}

func (g *group) deleteOffsets(tps []TopicPartition, results []error) error {
	var subscribed func(topic string) bool
	switch {
	case !g.hasMembers():
		subscribed = func(string) bool { return false }
	case g.kind == kindConsumer:
		subscribed = func(topic string) bool {
			for _, m := range g.consumer.members {
				if m.sub.subscribes(topic) {
					return true
				}
			}
			return false
		}
	case g.classic.protocolType == "consumer":
		topics := g.classic.subscribedTopics()
		subscribed = func(topic string) bool { return topics[topic] }
	default:
		return fmt.Errorf("%w: group %q has members of protocol type %q", ErrNonEmptyGroup, g.name, g.classic.protocolType)
	}
	var recs []record.Record
	var deleted []TopicPartition
	for i, tp := range tps {
		if results[i] != nil {
			continue
		}
		if subscribed(tp.Topic) {
			results[i] = fmt.Errorf("%w: a member of group %q consumes %s", ErrGroupSubscribedToTopic, g.name, tp.Topic)
			continue
		}
		if _, ok := g.offsets[tp.Topic][tp.Partition]; ok {
			recs = append(recs, record.Record{Key: offsetKey(g.name, tp.Topic, tp.Partition)})
			deleted = append(deleted, tp)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	if err := g.write(recs, true); err != nil {
		return err
	}
	for _, tp := range deleted {
		g.deleteOffset(tp.Topic, tp.Partition)
	}
	return nil
}

// subscribedTopics are the topics the members of a "consumer" classic
// group subscribe to, read from their metadata for the chosen protocol.
func (cg *classicGroup) subscribedTopics() map[string]bool {
	topics := map[string]bool{}
	for _, m := range cg.members {
		var meta kmsg.ConsumerMemberMetadata
		md := m.metadataFor(cg.protocol)
		if md == nil && len(m.protocols) > 0 {
			md = m.protocols[0].Metadata
		}
		if err := meta.ReadFrom(md); err != nil {
			continue
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics
}

// expireOffsets writes tombstones for the offsets of groups that have been
// empty for the retention period, and drops groups left with nothing.
// An offset's retention starts when the group became empty or when it was
// committed, whichever is later, so that offsets an admin tool sets on an
// idle group live their full retention.
func (c *Coordinator) expireOffsets(now time.Time) {
	for _, g := range c.snapshot() {
		g.mu.Lock()
		if !g.removed {
			g.expireOffsets(now)
		}
		g.mu.Unlock()
	}
}

func (g *group) expireOffsets(now time.Time) {
	if g.hasMembers() {
		return
	}
	retention := g.c.cfg.OffsetsRetention
	var recs []record.Record
	var expired []TopicPartition
	for topic, ps := range g.offsets {
		for p, o := range ps {
			start := o.committedAt
			if g.emptySince.After(start) {
				start = g.emptySince
			}
			if now.Sub(start) >= retention {
				recs = append(recs, record.Record{Key: offsetKey(g.name, topic, p)})
				expired = append(expired, TopicPartition{topic, p})
			}
		}
	}
	if len(recs) > 0 {
		if err := g.write(recs, false); err != nil {
			g.c.log.Error("cannot expire offsets", "group", g.name, "err", err)
			return
		}
		for _, tp := range expired {
			g.deleteOffset(tp.Topic, tp.Partition)
		}
		g.c.log.Info("expired offsets of an empty group", "group", g.name, "partitions", len(expired))
	}
	if len(g.offsets) == 0 && len(g.pendingTxn) == 0 {
		if err := g.write(g.metadataTombstones(), false); err != nil {
			g.c.log.Error("cannot delete empty group", "group", g.name, "err", err)
			return
		}
		g.markRemoved()
	}
}

// metadataTombstones delete the group's metadata records, whichever kind
// it had.
func (g *group) metadataTombstones() []record.Record {
	return []record.Record{{Key: classicGroupKey(g.name)}, {Key: consumerGroupKey(g.name)}}
}

// errUnknownTopic is for callers that look topics up by id.
func topicName(b *broker.Broker, id [16]byte) (string, bool) {
	t, err := b.TopicByID(id)
	if err != nil {
		return "", false
	}
	return t.Name(), true
}
