package group

import (
	"fmt"
	"slices"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// join handles a JoinGroup; reply is called now or when the rebalance
// completes.
func (g *group) join(req JoinRequest, reply func(JoinResponse)) {
	now := g.now()
	fail := func(err error) { reply(JoinResponse{Err: err, MemberID: req.MemberID}) }
	if g.kind == kindConsumer {
		if len(g.consumer.members) > 0 {
			fail(fmt.Errorf("%w: group %q is a consumer (KIP-848) group with members", ErrInconsistentGroupProtocol, g.name))
			return
		}
		g.becomeClassic(now)
	}
	cg := &g.classic
	if !cg.supportsProtocols(req.ProtocolType, req.Protocols) {
		fail(fmt.Errorf("%w: protocol type %q with protocols %v does not match the group's members", ErrInconsistentGroupProtocol, req.ProtocolType, protocolNames(req.Protocols)))
		return
	}

	if req.MemberID == "" {
		if req.InstanceID != nil {
			if oldID, ok := cg.static[*req.InstanceID]; ok {
				g.rejoinStatic(oldID, req, reply, now)
				return
			}
		}
		id := newMemberID(req.ClientID, req.InstanceID)
		if req.RequireKnownMemberID && req.InstanceID == nil {
			// KIP-394: hand out the id and wait for the member to come
			// back with it, so that a client that never does (it timed
			// out and retries with a fresh join) leaves no member behind.
			cg.pending[id] = now.Add(req.SessionTimeout)
			reply(JoinResponse{Err: ErrMemberIDRequired, MemberID: id})
			return
		}
		g.addClassicMember(id, req, reply, now)
		return
	}

	if req.InstanceID != nil {
		if err := cg.checkInstance(*req.InstanceID, req.MemberID); err != nil {
			fail(err)
			return
		}
	}
	if _, ok := cg.pending[req.MemberID]; ok {
		delete(cg.pending, req.MemberID)
		g.addClassicMember(req.MemberID, req, reply, now)
		return
	}
	m := cg.members[req.MemberID]
	if m == nil {
		fail(fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, req.MemberID, g.name))
		return
	}
	switch cg.state {
	case classicPreparingRebalance:
		g.updateClassicMember(m, req, reply)
		g.maybeCompleteJoin(now)
	case classicCompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			// It missed its JoinGroup answer: give it again.
			reply(cg.joinResponse(m.id))
			return
		}
		g.updateClassicMember(m, req, reply)
		g.prepareRebalance(now, "member "+m.id+" rejoined with new metadata")
	case classicStable:
		if m.id != cg.leader && m.sameProtocols(req.Protocols) {
			m.sessionDeadline = now.Add(m.sessionTimeout)
			reply(cg.joinResponse(m.id))
			return
		}
		g.updateClassicMember(m, req, reply)
		g.prepareRebalance(now, "member "+m.id+" rejoined")
	default:
		fail(fmt.Errorf("%w: group %q is %s", ErrUnknownMemberID, g.name, cg.state))
	}
}

// checkInstance validates a static member's instance id against its
// member id.
func (cg *classicGroup) checkInstance(instanceID, memberID string) error {
	id, ok := cg.static[instanceID]
	if !ok {
		return fmt.Errorf("%w: no member has instance id %q", ErrUnknownMemberID, instanceID)
	}
	if id != memberID {
		return fmt.Errorf("%w: instance id %q belongs to member %s, not %s", ErrFencedInstanceID, instanceID, id, memberID)
	}
	return nil
}

// addClassicMember adds a member whose JoinGroup waits for the rebalance
// it starts (or joins).
func (g *group) addClassicMember(id string, req JoinRequest, reply func(JoinResponse), now time.Time) {
	cg := &g.classic
	if len(cg.members) == 0 {
		cg.protocolType = req.ProtocolType
	}
	m := &classicMember{
		id:               id,
		instanceID:       req.InstanceID,
		clientID:         req.ClientID,
		clientHost:       req.ClientHost,
		sessionTimeout:   req.SessionTimeout,
		rebalanceTimeout: req.RebalanceTimeout,
		protocols:        slices.Clone(req.Protocols),
		joinOrder:        cg.joinSeq,
		joinReply:        reply,
	}
	cg.joinSeq++
	cg.members[id] = m
	if m.instanceID != nil {
		cg.static[*m.instanceID] = id
	}
	if cg.leader == "" {
		cg.leader = id
	}
	g.emptySince = time.Time{}
	if cg.state == classicPreparingRebalance {
		cg.newMemberAdded = true
		g.maybeCompleteJoin(now)
		return
	}
	g.prepareRebalance(now, "member "+id+" joined")
}

// updateClassicMember records a known member's new JoinGroup.
func (g *group) updateClassicMember(m *classicMember, req JoinRequest, reply func(JoinResponse)) {
	if m.joinReply != nil {
		// A retry from a new connection: the old request's client is
		// gone, but its handler still waits for an answer.
		m.joinReply(JoinResponse{Err: ErrRebalanceInProgress, MemberID: m.id})
	}
	m.protocols = slices.Clone(req.Protocols)
	m.sessionTimeout = req.SessionTimeout
	m.rebalanceTimeout = req.RebalanceTimeout
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	m.joinReply = reply
}

// rejoinStatic handles a static member that joins without a member id
// while its instance id is known (KIP-345): it replaces the old member,
// keeping its assignment, and the old member id is fenced. In a stable
// group with unchanged protocols no rebalance happens.
func (g *group) rejoinStatic(oldID string, req JoinRequest, reply func(JoinResponse), now time.Time) {
	cg := &g.classic
	old := cg.members[oldID]
	if old == nil {
		delete(cg.static, *req.InstanceID)
		g.addClassicMember(newMemberID(req.ClientID, req.InstanceID), req, reply, now)
		return
	}
	fenced := fmt.Errorf("%w: instance id %q rejoined as a new member", ErrFencedInstanceID, *req.InstanceID)
	if old.joinReply != nil {
		old.joinReply(JoinResponse{Err: fenced, MemberID: oldID})
		old.joinReply = nil
	}
	if old.syncReply != nil {
		old.syncReply(SyncResponse{Err: fenced})
		old.syncReply = nil
	}
	unchanged := old.sameProtocols(req.Protocols)
	m := &classicMember{
		id:               newMemberID(req.ClientID, req.InstanceID),
		instanceID:       req.InstanceID,
		clientID:         req.ClientID,
		clientHost:       req.ClientHost,
		sessionTimeout:   req.SessionTimeout,
		rebalanceTimeout: req.RebalanceTimeout,
		protocols:        slices.Clone(req.Protocols),
		assignment:       old.assignment,
		joinOrder:        old.joinOrder,
	}
	g.replaceClassicMember(old, m)

	if cg.state == classicStable && unchanged {
		// Record the new member id before answering, so that after a
		// restart the instance maps to the id its client now holds.
		if err := g.write([]record.Record{g.classicMetadataRecord()}, true); err != nil {
			g.replaceClassicMember(m, old)
			reply(JoinResponse{Err: err})
			return
		}
		m.sessionDeadline = now.Add(m.sessionTimeout)
		resp := cg.joinResponse(m.id)
		resp.SkipAssignment = m.id == cg.leader
		reply(resp)
		return
	}
	m.joinReply = reply
	if cg.state == classicPreparingRebalance {
		g.maybeCompleteJoin(now)
		return
	}
	g.prepareRebalance(now, "static member "+*req.InstanceID+" rejoined")
}

// replaceClassicMember puts m where old was: same instance, same place
// as leader and in the pending SyncGroups.
func (g *group) replaceClassicMember(old, m *classicMember) {
	cg := &g.classic
	delete(cg.members, old.id)
	cg.members[m.id] = m
	if m.instanceID != nil {
		cg.static[*m.instanceID] = m.id
	}
	if cg.leader == old.id {
		cg.leader = m.id
	}
	if cg.pendingSync[old.id] {
		delete(cg.pendingSync, old.id)
		cg.pendingSync[m.id] = true
	}
}

// removeClassicMember drops a member; err answers its parked request, if
// any. The caller decides whether a rebalance follows.
func (g *group) removeClassicMember(m *classicMember, err error) {
	cg := &g.classic
	if m.joinReply != nil {
		m.joinReply(JoinResponse{Err: err, MemberID: m.id})
		m.joinReply = nil
	}
	if m.syncReply != nil {
		m.syncReply(SyncResponse{Err: err})
		m.syncReply = nil
	}
	delete(cg.members, m.id)
	delete(cg.pendingSync, m.id)
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	if cg.leader == m.id {
		cg.leader = ""
		if ms := cg.membersInJoinOrder(); len(ms) > 0 {
			cg.leader = ms[0].id
		}
	}
}

// prepareRebalance starts a rebalance: every member must join again.
func (g *group) prepareRebalance(now time.Time, reason string) {
	cg := &g.classic
	if cg.state == classicCompletingRebalance {
		// Assignments of the unfinished generation are void.
		for _, m := range cg.members {
			m.assignment = nil
			if m.syncReply != nil {
				m.syncReply(SyncResponse{Err: ErrRebalanceInProgress})
				m.syncReply = nil
				m.sessionDeadline = now.Add(m.sessionTimeout)
			}
		}
		cg.pendingSync = nil
	}
	wasEmpty := cg.state == classicEmpty || cg.state == classicDead
	cg.setState(classicPreparingRebalance, now)
	timeout := cg.maxRebalanceTimeout()
	cg.initialDelay = wasEmpty && g.c.cfg.InitialRebalanceDelay > 0
	if cg.initialDelay {
		// As in Kafka, the first wait is the whole delay even when the
		// rebalance timeout is shorter; only the extensions for members
		// that join meanwhile come out of the rebalance timeout.
		delay := g.c.cfg.InitialRebalanceDelay
		cg.joinDeadline = now.Add(delay)
		cg.initialBudget = max(timeout-delay, 0)
		cg.newMemberAdded = false
	} else {
		cg.joinDeadline = now.Add(timeout)
	}
	g.c.log.Debug("preparing rebalance", "group", g.name, "generation", cg.generation, "reason", reason)
	g.maybeCompleteJoin(now)
}

// maybeCompleteJoin completes the join phase once everyone has joined,
// unless the initial delay of an empty group is still running.
func (g *group) maybeCompleteJoin(now time.Time) {
	cg := &g.classic
	if cg.state == classicPreparingRebalance && !cg.initialDelay && cg.allJoined() {
		g.completeJoin(now)
	}
}

// completeJoin ends the join phase: members that did not rejoin are
// removed, the generation advances, and every member gets its JoinGroup
// answer (the leader with all members' metadata).
func (g *group) completeJoin(now time.Time) {
	cg := &g.classic
	for _, m := range cg.membersInJoinOrder() {
		if m.joinReply == nil {
			g.c.log.Info("removing member that did not rejoin in time", "group", g.name, "member", m.id)
			g.removeClassicMember(m, fmt.Errorf("%w: did not rejoin within the rebalance timeout", ErrUnknownMemberID))
		}
	}
	cg.initialDelay = false
	cg.generation++
	if len(cg.members) == 0 {
		cg.protocol, cg.leader = "", ""
		cg.setState(classicEmpty, now)
		g.becameEmpty(now)
		g.writeLogged([]record.Record{g.classicMetadataRecord()}, "group became empty")
		return
	}
	if cg.members[cg.leader] == nil {
		cg.leader = cg.membersInJoinOrder()[0].id
	}
	cg.protocol = cg.selectProtocol()
	cg.setState(classicCompletingRebalance, now)
	cg.syncDeadline = now.Add(cg.maxRebalanceTimeout())
	cg.pendingSync = map[string]bool{}
	for _, m := range cg.membersInJoinOrder() {
		cg.pendingSync[m.id] = true
		reply := m.joinReply
		m.joinReply = nil
		m.sessionDeadline = now.Add(m.sessionTimeout)
		reply(cg.joinResponse(m.id))
	}
	g.c.log.Debug("rebalance joined", "group", g.name, "generation", cg.generation, "members", len(cg.members), "protocol", cg.protocol)
}

// sync handles a SyncGroup.
func (g *group) sync(req SyncRequest, reply func(SyncResponse)) {
	now := g.now()
	cg := &g.classic
	fail := func(err error) { reply(SyncResponse{Err: err}) }
	if g.kind != kindClassic {
		fail(fmt.Errorf("%w: group %q is a consumer (KIP-848) group", ErrUnknownMemberID, g.name))
		return
	}
	if req.InstanceID != nil {
		if id, ok := cg.static[*req.InstanceID]; ok && id != req.MemberID {
			fail(fmt.Errorf("%w: instance id %q belongs to member %s", ErrFencedInstanceID, *req.InstanceID, id))
			return
		}
	}
	m := cg.members[req.MemberID]
	switch {
	case m == nil:
		fail(fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, req.MemberID, g.name))
		return
	case req.Generation != cg.generation:
		fail(fmt.Errorf("%w: generation %d, the group is at %d", ErrIllegalGeneration, req.Generation, cg.generation))
		return
	case req.ProtocolType != nil && *req.ProtocolType != cg.protocolType,
		req.Protocol != nil && *req.Protocol != cg.protocol:
		fail(fmt.Errorf("%w: the group uses protocol %q of type %q", ErrInconsistentGroupProtocol, cg.protocol, cg.protocolType))
		return
	}
	switch cg.state {
	case classicPreparingRebalance:
		fail(ErrRebalanceInProgress)
	case classicCompletingRebalance:
		if m.syncReply != nil {
			m.syncReply(SyncResponse{Err: ErrRebalanceInProgress})
		}
		m.syncReply = reply
		delete(cg.pendingSync, m.id)
		if m.id == cg.leader {
			g.completeSync(req.Assignments, now)
		}
	case classicStable:
		m.sessionDeadline = now.Add(m.sessionTimeout)
		reply(cg.syncResponse(m))
	default:
		fail(fmt.Errorf("%w: group %q is %s", ErrUnknownMemberID, g.name, cg.state))
	}
}

// completeSync stores the leader's assignments durably and answers every
// waiting SyncGroup: the group is stable.
func (g *group) completeSync(assignments map[string][]byte, now time.Time) {
	cg := &g.classic
	for _, m := range cg.members {
		m.assignment = slices.Clone(assignments[m.id])
	}
	prevSince := cg.stateSince
	cg.setState(classicStable, now)
	if err := g.write([]record.Record{g.classicMetadataRecord()}, true); err != nil {
		cg.setState(classicCompletingRebalance, prevSince)
		for _, m := range cg.members {
			m.assignment = nil
			if m.syncReply != nil {
				m.syncReply(SyncResponse{Err: err})
				m.syncReply = nil
				m.sessionDeadline = now.Add(m.sessionTimeout)
			}
		}
		g.prepareRebalance(now, "storing the assignment failed")
		return
	}
	cg.pendingSync = nil
	cg.syncDeadline = time.Time{}
	for _, m := range cg.members {
		if m.syncReply != nil {
			reply := m.syncReply
			m.syncReply = nil
			m.sessionDeadline = now.Add(m.sessionTimeout)
			reply(cg.syncResponse(m))
		}
	}
	g.c.log.Debug("group stable", "group", g.name, "generation", cg.generation)
}

// heartbeat handles a classic Heartbeat.
func (g *group) heartbeat(req HeartbeatRequest) error {
	now := g.now()
	cg := &g.classic
	if g.kind != kindClassic {
		return fmt.Errorf("%w: group %q is a consumer (KIP-848) group", ErrUnknownMemberID, g.name)
	}
	if req.InstanceID != nil {
		if id, ok := cg.static[*req.InstanceID]; ok && id != req.MemberID {
			return fmt.Errorf("%w: instance id %q belongs to member %s", ErrFencedInstanceID, *req.InstanceID, id)
		}
	}
	m := cg.members[req.MemberID]
	switch {
	case m == nil || cg.state == classicEmpty || cg.state == classicDead:
		return fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, req.MemberID, g.name)
	case req.Generation != cg.generation:
		return fmt.Errorf("%w: generation %d, the group is at %d", ErrIllegalGeneration, req.Generation, cg.generation)
	}
	m.sessionDeadline = now.Add(m.sessionTimeout)
	if cg.state == classicPreparingRebalance {
		return ErrRebalanceInProgress
	}
	return nil
}

// leave handles a LeaveGroup: one result per member.
func (g *group) leave(members []LeavingMember) []error {
	now := g.now()
	cg := &g.classic
	results := make([]error, len(members))
	removed := false
	for i, lm := range members {
		if g.kind != kindClassic {
			results[i] = fmt.Errorf("%w: group %q is a consumer (KIP-848) group", ErrUnknownMemberID, g.name)
			continue
		}
		id := lm.MemberID
		if lm.InstanceID != nil {
			known, ok := cg.static[*lm.InstanceID]
			switch {
			case !ok:
				results[i] = fmt.Errorf("%w: no member has instance id %q", ErrUnknownMemberID, *lm.InstanceID)
				continue
			case id != "" && id != known:
				results[i] = fmt.Errorf("%w: instance id %q belongs to member %s", ErrFencedInstanceID, *lm.InstanceID, known)
				continue
			}
			id = known
		}
		if _, ok := cg.pending[id]; ok {
			delete(cg.pending, id)
			removed = true
			continue
		}
		m := cg.members[id]
		if m == nil {
			results[i] = fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMemberID, id, g.name)
			continue
		}
		g.c.log.Debug("member left", "group", g.name, "member", id)
		g.removeClassicMember(m, fmt.Errorf("%w: the member left", ErrUnknownMemberID))
		removed = true
	}
	if removed {
		g.afterClassicRemoval(now, "members left")
	}
	return results
}

// afterClassicRemoval moves the group on after members were removed.
func (g *group) afterClassicRemoval(now time.Time, reason string) {
	switch g.classic.state {
	case classicStable, classicCompletingRebalance:
		g.prepareRebalance(now, reason)
	case classicPreparingRebalance:
		g.maybeCompleteJoin(now)
	}
}

// classicTick acts on the classic group's passed deadlines.
func (g *group) classicTick(now time.Time) {
	cg := &g.classic
	removed := false
	for id, exp := range cg.pending {
		if !now.Before(exp) {
			delete(cg.pending, id)
			removed = true
		}
	}
	for _, m := range cg.membersInJoinOrder() {
		if !m.waiting() && !m.sessionDeadline.IsZero() && !now.Before(m.sessionDeadline) {
			g.c.log.Info("member session expired", "group", g.name, "member", m.id, "session_timeout", m.sessionTimeout)
			g.removeClassicMember(m, ErrUnknownMemberID)
			removed = true
		}
	}
	switch cg.state {
	case classicPreparingRebalance:
		if removed {
			g.maybeCompleteJoin(now)
		}
		if cg.state != classicPreparingRebalance || now.Before(cg.joinDeadline) {
			return
		}
		if cg.initialDelay && cg.newMemberAdded && cg.initialBudget > 0 {
			delay := min(g.c.cfg.InitialRebalanceDelay, cg.initialBudget)
			cg.initialBudget -= delay
			cg.joinDeadline = now.Add(delay)
			cg.newMemberAdded = false
			return
		}
		g.completeJoin(now)
	case classicCompletingRebalance:
		if !removed && !now.Before(cg.syncDeadline) {
			for id := range cg.pendingSync {
				if m := cg.members[id]; m != nil {
					g.c.log.Info("removing member that did not sync in time", "group", g.name, "member", id)
					g.removeClassicMember(m, ErrUnknownMemberID)
					removed = true
				}
			}
		}
		if removed {
			g.prepareRebalance(now, "members expired")
		}
	case classicStable:
		if removed {
			g.prepareRebalance(now, "members expired")
		}
	}
}

// classicMetadataRecord is the group's current metadata as a record.
func (g *group) classicMetadataRecord() record.Record {
	return record.Record{Key: classicGroupKey(g.name), Value: classicGroupValue(g)}
}

func protocolNames(ps []Protocol) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}
