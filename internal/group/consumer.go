package group

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// TopicPartitions names partitions of one topic by its id, as the KIP-848
// protocol does.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// ConsumerHeartbeatRequest is a ConsumerGroupHeartbeat (KIP-848). Fields
// that are nil mean "unchanged since my last heartbeat".
type ConsumerHeartbeatRequest struct {
	Group       string
	MemberID    string
	MemberEpoch int32 // 0 joins, -1 leaves, -2 leaves for now (static members)
	InstanceID  *string
	RackID      *string
	ClientID    string
	ClientHost  string

	RebalanceTimeout     time.Duration // negative: unchanged
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	ServerAssignor       *string
	// Owned is what the member owns now; an empty non-nil slice is
	// nothing, nil is "as in my last full heartbeat".
	Owned []TopicPartitions
}

// ConsumerHeartbeatResponse is the answer to a ConsumerGroupHeartbeat.
type ConsumerHeartbeatResponse struct {
	Err               error
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is set when the member must (re)apply its assignment.
	Assignment    []TopicPartitions
	HasAssignment bool
}

// Server-side assignors (group.consumer.assignors), the first the default.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// ConsumerGroupHeartbeat joins, keeps alive, reconciles or removes a
// KIP-848 member.
func (c *Coordinator) ConsumerGroupHeartbeat(req ConsumerHeartbeatRequest) ConsumerHeartbeatResponse {
	resp := ConsumerHeartbeatResponse{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	if err := validGroupID(req.Group, false); err != nil {
		resp.Err = err
		return resp
	}
	if req.MemberEpoch < -2 {
		resp.Err = fmt.Errorf("%w: member epoch %d", ErrInvalidRequest, req.MemberEpoch)
		return resp
	}
	err := c.withGroup(req.Group, req.MemberEpoch == 0, func(g *group) { resp = g.consumerHeartbeat(req) })
	if err != nil {
		resp.Err = asUnknownMember(err)
	}
	resp.HeartbeatInterval = c.cfg.ConsumerHeartbeatInterval
	return resp
}

func (g *group) consumerHeartbeat(req ConsumerHeartbeatRequest) ConsumerHeartbeatResponse {
	now := g.now()
	if g.kind == kindClassic {
		if g.hasMembers() {
			return ConsumerHeartbeatResponse{Err: fmt.Errorf("%w: group %q is a classic group with members", ErrGroupIDNotFound, g.name)}
		}
		if req.MemberEpoch != 0 {
			return ConsumerHeartbeatResponse{Err: fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, req.MemberID, g.name)}
		}
		g.becomeConsumer(now)
	}
	switch req.MemberEpoch {
	case 0:
		return g.consumerJoin(req, now)
	case -1, -2:
		return g.consumerLeave(req, now)
	default:
		return g.consumerBeat(req, now)
	}
}

// consumerJoin handles a heartbeat with epoch 0: a new member, a member
// rejoining after an error, or a static member coming back.
func (g *group) consumerJoin(req ConsumerHeartbeatRequest, now time.Time) ConsumerHeartbeatResponse {
	cg := &g.consumer
	fail := func(err error) ConsumerHeartbeatResponse {
		return ConsumerHeartbeatResponse{Err: err, MemberID: req.MemberID}
	}
	switch {
	case len(req.Owned) > 0:
		return fail(fmt.Errorf("%w: TopicPartitions must be empty when (re-)joining", ErrInvalidRequest))
	case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
		return fail(fmt.Errorf("%w: SubscribedTopicNames or SubscribedTopicRegex must be set in the first request", ErrInvalidRequest))
	case req.RebalanceTimeout < 0:
		return fail(fmt.Errorf("%w: RebalanceTimeoutMs must be set in the first request", ErrInvalidRequest))
	}
	sub, err := newSubscription(req.SubscribedTopicNames, req.SubscribedTopicRegex, req.ServerAssignor)
	if err != nil {
		return fail(err)
	}
	id := req.MemberID
	if id == "" {
		id = newConsumerMemberID()
	}

	// A static member coming back takes over what its previous
	// incarnation held; one still active blocks the instance id.
	var inherited *consumerMember
	if req.InstanceID != nil {
		if oldID, ok := cg.static[*req.InstanceID]; ok && oldID != id {
			if old := cg.members[oldID]; old != nil {
				if !old.leftStatic {
					return fail(fmt.Errorf("%w: instance id %q is held by active member %s", ErrUnreleasedInstanceID, *req.InstanceID, oldID))
				}
				inherited = old
				delete(cg.members, oldID)
			}
		}
	}
	if prev := cg.members[id]; prev != nil {
		if prev.leftStatic && inherited == nil {
			inherited = prev
		} else {
			// The same member joining again (after FENCED_MEMBER_EPOCH,
			// say) owns nothing now, so neither does the server's view
			// of it. Its target stays valid: it is the same member.
			g.releaseAll(prev)
			inherited = &consumerMember{target: prev.target, sub: prev.sub}
		}
		delete(cg.members, id)
	}
	if inherited != nil {
		sub = sub.orDefaults(inherited.sub)
	}

	m := &consumerMember{
		id:               id,
		instanceID:       req.InstanceID,
		rackID:           req.RackID,
		clientID:         req.ClientID,
		clientHost:       req.ClientHost,
		rebalanceTimeout: req.RebalanceTimeout,
		sub:              sub,
		assigned:         partitionSet{},
		assignedAt:       map[topicPartition]int32{},
		target:           partitionSet{},
	}
	bump := true
	if inherited != nil {
		m.target = inherited.target
		if inherited.assigned != nil {
			m.takeOver(inherited, cg)
		}
		bump = !sameSubscription(inherited.sub, sub)
	}
	cg.members[id] = m
	if m.instanceID != nil {
		cg.static[*m.instanceID] = id
	}
	g.emptySince = time.Time{}
	m.sessionDeadline = now.Add(g.c.cfg.ConsumerSessionTimeout)
	if bump || !g.consumerMetadataCurrent() {
		g.bumpConsumerEpoch(now, "member "+id+" joined")
	}
	g.reconcile(m, []TopicPartitions{}, now)
	return ConsumerHeartbeatResponse{
		MemberID:      id,
		MemberEpoch:   m.epoch,
		Assignment:    m.assigned.toTopicPartitions(),
		HasAssignment: true,
	}
}

// consumerLeave handles epochs -1 (leave) and -2 (a static member leaving
// for now, expecting to come back within its session timeout).
func (g *group) consumerLeave(req ConsumerHeartbeatRequest, now time.Time) ConsumerHeartbeatResponse {
	cg := &g.consumer
	m := cg.members[req.MemberID]
	if m == nil {
		return ConsumerHeartbeatResponse{Err: fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, req.MemberID, g.name), MemberID: req.MemberID}
	}
	if req.MemberEpoch == -2 && m.instanceID != nil {
		// Keep its partitions reserved and its place in the target
		// assignment; only what it was revoking is free now.
		m.leftStatic = true
		g.releaseRevoking(m)
		return ConsumerHeartbeatResponse{MemberID: m.id, MemberEpoch: -2}
	}
	g.removeConsumerMember(m, now)
	g.bumpConsumerEpoch(now, "member "+m.id+" left")
	return ConsumerHeartbeatResponse{MemberID: m.id, MemberEpoch: -1}
}

// consumerBeat handles a heartbeat of a member in the group.
func (g *group) consumerBeat(req ConsumerHeartbeatRequest, now time.Time) ConsumerHeartbeatResponse {
	cg := &g.consumer
	fail := func(err error) ConsumerHeartbeatResponse {
		return ConsumerHeartbeatResponse{Err: err, MemberID: req.MemberID}
	}
	m := cg.members[req.MemberID]
	if m == nil {
		if req.InstanceID != nil {
			if owner, ok := cg.static[*req.InstanceID]; ok && owner != req.MemberID {
				return fail(fmt.Errorf("%w: instance id %q belongs to member %s", ErrFencedInstanceID, *req.InstanceID, owner))
			}
		}
		return fail(fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, req.MemberID, g.name))
	}
	if m.leftStatic {
		return fail(fmt.Errorf("%w: the member left the group; it must join with epoch 0", ErrFencedMemberEpoch))
	}
	if req.MemberEpoch != m.epoch {
		// The member may have missed our last answer: its previous epoch
		// is fine as long as it owns nothing it should not.
		if req.MemberEpoch != m.previousEpoch || req.Owned == nil || !m.assigned.containsAll(req.Owned) {
			return fail(fmt.Errorf("%w: epoch %d, the member is at %d", ErrFencedMemberEpoch, req.MemberEpoch, m.epoch))
		}
	}
	m.sessionDeadline = now.Add(g.c.cfg.ConsumerSessionTimeout)
	if req.RebalanceTimeout >= 0 {
		m.rebalanceTimeout = req.RebalanceTimeout
	}
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	m.clientID, m.clientHost = req.ClientID, req.ClientHost

	sub, err := newSubscription(req.SubscribedTopicNames, req.SubscribedTopicRegex, req.ServerAssignor)
	if err != nil {
		return fail(err)
	}
	sub = sub.orDefaults(m.sub)
	if !sameSubscription(m.sub, sub) {
		m.sub = sub
		g.bumpConsumerEpoch(now, "member "+m.id+" changed its subscription")
	} else if !g.consumerMetadataCurrent() {
		g.bumpConsumerEpoch(now, "subscribed topics changed")
	}

	changed := g.reconcile(m, req.Owned, now)
	resp := ConsumerHeartbeatResponse{MemberID: m.id, MemberEpoch: m.epoch}
	if changed || req.Owned != nil && !m.assigned.equalTo(req.Owned) {
		resp.Assignment = m.assigned.toTopicPartitions()
		resp.HasAssignment = true
	}
	return resp
}

// becomeConsumer turns an empty classic group (or one with only offsets)
// into a KIP-848 group.
func (g *group) becomeConsumer(now time.Time) {
	if g.classic.protocolType != "" || g.classic.generation > 0 {
		g.writeLogged([]record.Record{{Key: classicGroupKey(g.name)}}, "classic group became a consumer group")
	}
	g.kind = kindConsumer
	g.classic.init(now)
	g.classic.protocolType, g.classic.generation = "", 0
	g.classic.state = classicEmpty
	g.consumer.init()
}

// becomeClassic turns an empty KIP-848 group into a classic one.
func (g *group) becomeClassic(now time.Time) {
	if g.consumer.epoch > 0 {
		g.writeLogged([]record.Record{{Key: consumerGroupKey(g.name)}}, "consumer group became a classic group")
	}
	g.kind = kindClassic
	g.consumer.init()
	g.classic.init(now)
}

// consumerTick fences members whose session or revocation time is up.
func (g *group) consumerTick(now time.Time) {
	cg := &g.consumer
	var reasons []string
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		switch {
		case !now.Before(m.sessionDeadline):
			g.c.log.Info("member session expired", "group", g.name, "member", id)
			reasons = append(reasons, "session of "+id+" expired")
		case !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline):
			g.c.log.Info("member did not revoke its partitions in time", "group", g.name, "member", id)
			reasons = append(reasons, id+" did not revoke in time")
		default:
			continue
		}
		g.removeConsumerMember(m, now)
	}
	if len(reasons) > 0 {
		g.bumpConsumerEpoch(now, reasons[0])
	}
}

// removeConsumerMember drops a member and frees what it held.
func (g *group) removeConsumerMember(m *consumerMember, now time.Time) {
	cg := &g.consumer
	g.releaseAll(m)
	delete(cg.members, m.id)
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	if len(cg.members) == 0 {
		g.becameEmpty(now)
	}
}

// bumpConsumerEpoch advances the group epoch after a change of members,
// subscriptions or subscribed topics, and computes the new target
// assignment right away.
func (g *group) bumpConsumerEpoch(now time.Time, reason string) {
	cg := &g.consumer
	cg.epoch++
	g.computeTargetAssignment()
	cg.assignmentEpoch = cg.epoch
	g.c.log.Debug("group epoch bumped", "group", g.name, "epoch", cg.epoch, "reason", reason)
	g.writeLogged([]record.Record{{Key: consumerGroupKey(g.name), Value: consumerGroupValue(cg.epoch)}}, "group epoch")
}

// newConsumerMemberID makes a member id for a v0 client that sent none
// (v1 clients choose their own): a random UUID, base64 as Kafka's.
func newConsumerMemberID() string {
	var u [16]byte
	rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// subscription is what a member consumes and how it wants it assigned.
type subscription struct {
	topics   []string // sorted
	regex    string
	re       *regexp.Regexp
	assignor string

	// Which fields the heartbeat carried; see orDefaults.
	topicsSet, regexSet bool
}

// newSubscription reads a heartbeat's subscription fields.
func newSubscription(names []string, regex, assignor *string) (subscription, error) {
	var s subscription
	if names != nil {
		s.topicsSet = true
		s.topics = slices.Compact(slices.Sorted(slices.Values(names)))
	}
	if regex != nil {
		s.regexSet = true
		s.regex = *regex
		if s.regex != "" {
			re, err := regexp.Compile("^(?:" + s.regex + ")$")
			if err != nil {
				return s, fmt.Errorf("%w: %v", ErrInvalidRegularExpression, err)
			}
			s.re = re
		}
	}
	if assignor != nil && *assignor != "" {
		if *assignor != AssignorUniform && *assignor != AssignorRange {
			return s, fmt.Errorf("%w: %q; Wharf has %q and %q", ErrUnsupportedAssignor, *assignor, AssignorUniform, AssignorRange)
		}
		s.assignor = *assignor
	}
	return s, nil
}

// orDefaults fills what a heartbeat left out (null fields: unchanged) from
// the previous subscription.
func (s subscription) orDefaults(prev subscription) subscription {
	if !s.topicsSet {
		s.topics = prev.topics
	}
	if !s.regexSet {
		s.regex, s.re = prev.regex, prev.re
	}
	if s.assignor == "" {
		s.assignor = prev.assignor
	}
	return s
}

// subscribes reports whether the subscription covers a topic.
func (s subscription) subscribes(topic string) bool {
	_, found := slices.BinarySearch(s.topics, topic)
	return found || s.re != nil && s.re.MatchString(topic)
}

func sameSubscription(a, b subscription) bool {
	return slices.Equal(a.topics, b.topics) && a.regex == b.regex && a.assignor == b.assignor
}
