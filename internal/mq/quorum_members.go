package mq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Quorum queue membership in a cluster (issue 14), as RabbitMQ 4 has it.
//
// Grow and shrink (rabbitmq-queues grow/shrink): a change is a target
// membership written into the queue's record (queueRecord.Target); every
// node applies it, and a node the target names that holds no replica
// opens an empty one, which joins the group. The queue's leader drives
// its group towards the target one member at a time, as partition
// reassignments are driven (internal/broker/reassign.go): a new member
// joins as a learner and is promoted once caught up; only then does a
// member outside the target go, the leader first handing its leadership
// to another caught-up member if it is the one to go. When the voters
// are the target, the leader records it as the queue's members; a node
// no longer named closes and deletes its replica. At every step a
// majority of the voters holds every committed command, so nothing
// confirmed is lost. A new change replaces one in progress (it starts
// from that one's target), so a grow onto a node that never catches up
// can be shrunk away again. A joined node gets no replicas by itself, as
// in RabbitMQ: the operator grows the queues onto it.
//
// A record is written whole, from the record as read, so every write of
// membership (a change, the leader's record of one done) is conditional
// (ClusterConfig.PutIf): every node ignores it, as it applies it, unless
// the record is still the one it was made from. A write that lands after
// the queue was deleted (and maybe declared again, under a new id) so
// cannot bring the queue back, and the leader's record of a change done,
// held up until a new change was written, cannot undo that one. A grow or
// shrink waits until its change is applied (awaitChanges), as RabbitMQ's
// do, and writes it again from the record as it is if its write was
// ignored: each change counts up queueRecord.Change, which the leader's
// record of a change done keeps, so a lower count (or the same count with
// another target) is the sign. A later change that includes this one is
// waited for instead; one that undoes it is reported.

// quorumMembership is a quorum queue's members as recorded, and the
// target of the change in progress (nil if none).
type quorumMembership struct {
	Members []int32
	Target  []int32
}

// current is the members the queue has or is moving to: a new change
// starts from there, and replaces the one in progress (the leader drives
// the group to the latest target, whatever it reached of the last one;
// so a grow onto a node that never catches up can be undone by a
// shrink).
func (rec *queueRecord) current() []int32 {
	if rec.Target != nil {
		return rec.Target
	}
	return rec.Members
}

// holds reports whether node holds, or is to hold, a replica.
func (ms *quorumMembership) holds(node int32) bool {
	return slices.Contains(ms.Members, node) || slices.Contains(ms.Target, node)
}

// members are q's recorded members (nil for a queue that is not a
// quorum queue of a cluster).
func (q *queue) members() []int32 {
	if ms := q.membership.Load(); ms != nil {
		return ms.Members
	}
	return nil
}

// MembershipChange is what GrowQuorumQueues or ShrinkQuorumQueues did
// to one quorum queue: its members becoming Target, or why not (Err;
// ErrChangePending if the change is recorded but was not applied in
// time).
type MembershipChange struct {
	VHost, Queue    string
	Members, Target []int32
	Err             error
}

// Errors of membership changes.
var (
	ErrNotClustered = errors.New("quorum queue membership changes need a cluster")
	ErrUnknownNode  = errors.New("not a node of the cluster")
	// ErrChangePending is a change recorded but not yet applied when
	// the caller stopped waiting: the queue's leader carries it on.
	ErrChangePending = errors.New("the change is recorded but not applied yet; the queue's leader carries it on")
	errLastMember    = errors.New("the node is the queue's only member")
	errChangeUndone  = errors.New("another grow or shrink undid this change before it was applied")
	errQueueGone     = errors.New("the queue was deleted")
)

// QuorumSelection picks the quorum queues a grow applies to: those of
// vhosts and names matching (nil: all); EvenOnly, RabbitMQ's "even"
// strategy, keeps only queues with an even number of members.
type QuorumSelection struct {
	VHosts, Queues *regexp.Regexp
	EvenOnly       bool
}

// GrowQuorumQueues adds node as a member of the selected quorum queues
// that lack it (rabbitmq-queues grow), and waits until each change is
// applied or ctx ends.
func (r *Registry) GrowQuorumQueues(ctx context.Context, node int32, sel QuorumSelection) ([]MembershipChange, error) {
	if r.cfg.Cluster == nil {
		return nil, ErrNotClustered
	}
	if !slices.Contains(r.cfg.Cluster.Nodes(), node) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownNode, NodeName(node))
	}
	return r.changeMembership(ctx, func(v *VHost, q *queue, members []int32) ([]int32, error) {
		switch {
		case slices.Contains(members, node):
			return nil, nil
		case sel.VHosts != nil && !sel.VHosts.MatchString(v.name), sel.Queues != nil && !sel.Queues.MatchString(q.name):
			return nil, nil
		case sel.EvenOnly && len(members)%2 != 0:
			return nil, nil
		}
		return append(slices.Clone(members), node), nil
	})
}

// ShrinkQuorumQueues removes node's replica from every quorum queue that
// has one, never below one member (rabbitmq-queues shrink), and waits
// until each change is applied or ctx ends; a queue node leads hands its
// leadership on first.
func (r *Registry) ShrinkQuorumQueues(ctx context.Context, node int32) ([]MembershipChange, error) {
	if r.cfg.Cluster == nil {
		return nil, ErrNotClustered
	}
	return r.changeMembership(ctx, func(_ *VHost, _ *queue, members []int32) ([]int32, error) {
		switch {
		case !slices.Contains(members, node):
			return nil, nil
		case len(members) == 1:
			return nil, errLastMember
		}
		return slices.DeleteFunc(slices.Clone(members), func(n int32) bool { return n == node }), nil
	})
}

// ShrinkOff removes node from every quorum queue it is a member of and
// waits until that is done or ctx ends, for the node's removal from the
// cluster (PrepareRemoval). It fails, naming the queues, if
// the node is the only member of some (their messages would go with it),
// or if a change is not applied in time or was undone.
func (r *Registry) ShrinkOff(ctx context.Context, node int32) error {
	changes, err := r.ShrinkQuorumQueues(ctx, node)
	if err != nil {
		return fmt.Errorf("still holds quorum queue replicas: %w", err)
	}
	var only, left []string
	for _, c := range changes {
		name := fmt.Sprintf("%q in vhost %q", c.Queue, c.VHost)
		switch {
		case c.Err == nil, errors.Is(c.Err, errQueueGone):
		case errors.Is(c.Err, errLastMember):
			only = append(only, name)
		default:
			left = append(left, fmt.Sprintf("%s (%v)", name, c.Err))
		}
	}
	switch {
	case len(only) > 0:
		return fmt.Errorf("is the only member of quorum queues %s: grow them onto another node (wharf queues grow) or delete them first",
			strings.Join(only, ", "))
	case len(left) > 0:
		return fmt.Errorf("still holds replicas of quorum queues %s; shrinking them off goes on (wharf queues shrink %d)",
			strings.Join(left, ", "), node)
	}
	return nil
}

// targetFunc gives the target of a change of q whose members are, or
// are moving to, members; nil and no error: nothing to change.
type targetFunc func(v *VHost, q *queue, members []int32) ([]int32, error)

// changeWait is one queue's change, until it is applied (done).
type changeWait struct {
	MembershipChange
	v      *VHost
	q      *queue
	change uint64 // the record's Change this change is written under
	done   bool
}

// changeMembership writes, for every quorum queue, the target that
// targetOf gives it, and waits until each is applied or ctx ends.
func (r *Registry) changeMembership(ctx context.Context, targetOf targetFunc) ([]MembershipChange, error) {
	// Changes start from the records as the cluster has them, written on
	// any node.
	if err := r.cfg.Cluster.Barrier(); err != nil {
		return nil, err
	}
	var ws []*changeWait
	for _, v := range r.vhostList() {
		v.defMu.Lock()
		v.mu.RLock()
		qs := make([]*queue, 0, len(v.queues))
		for _, q := range v.queues {
			if q.membership.Load() != nil {
				qs = append(qs, q)
			}
		}
		v.mu.RUnlock()
		slices.SortFunc(qs, func(a, b *queue) int { return compareStrings(a.name, b.name) })
		for _, q := range qs {
			rec, raw, ok := r.liveQueueRecord(queueKey(v.name, q.name), q.id)
			w := &changeWait{MembershipChange: MembershipChange{VHost: v.name, Queue: q.name, Members: rec.Members}, v: v, q: q}
			if ok && w.write(rec, raw, targetOf) {
				ws = append(ws, w)
			}
		}
		v.defMu.Unlock()
	}
	r.awaitChanges(ctx, ws, targetOf)
	out := make([]MembershipChange, len(ws))
	for i, w := range ws {
		out[i] = w.MembershipChange
	}
	return out, nil
}

// write writes the target targetOf gives the queue whose record is rec
// (stored as raw), or the error, and reports whether there was a change
// to make. Caller holds w.v.defMu.
func (w *changeWait) write(rec queueRecord, raw []byte, targetOf targetFunc) bool {
	target, err := targetOf(w.v, w.q, rec.current())
	if target == nil && err == nil {
		return false
	}
	w.Target, w.Err = target, err
	if err == nil {
		rec.Target, rec.Change = target, rec.Change+1
		w.Err, w.change = w.q.r.cfg.Cluster.PutIf(queueKey(w.v.name, w.q.name), mustJSON(rec), raw), rec.Change
	}
	w.done = w.Err != nil
	return true
}

// awaitChanges waits until every change of ws is applied, written again
// if its write was ignored (see the top of this file), or ctx ends or the
// registry closes (ErrChangePending).
func (r *Registry) awaitChanges(ctx context.Context, ws []*changeWait, targetOf targetFunc) {
	for {
		applied := r.membersApplied.wait() // before the records are read: no change goes unheard
		left := 0
		for _, w := range ws {
			if !w.done {
				w.check(targetOf)
			}
			if !w.done {
				left++
			}
		}
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
		case <-applied:
			continue
		case <-time.After(membershipRetry): // the registry may be closing
			if !r.closed.Load() {
				continue
			}
		}
		for _, w := range ws {
			if !w.done {
				w.Err, w.done = ErrChangePending, true
			}
		}
		return
	}
}

// check looks at the queue's record as this node applied it: done once
// it shows the change applied (or one that includes it); written again
// if its write was ignored.
func (w *changeWait) check(targetOf targetFunc) {
	r := w.q.r
	key := queueKey(w.v.name, w.q.name)
	rec, _, ok := r.liveQueueRecord(key, w.q.id)
	if ok && rec.Change > w.change {
		// A later change: it carries this one if it leaves it nothing to do.
		if target, err := targetOf(w.v, w.q, rec.current()); target != nil || err != nil {
			w.Err, w.done = errChangeUndone, true
			return
		}
		w.Target, w.change = rec.current(), rec.Change
	}
	switch {
	case !ok:
		w.Err, w.done = errQueueGone, true
	case rec.Change == w.change && slices.Equal(rec.Target, w.Target):
		// In progress.
	case rec.Change == w.change && rec.Target == nil && slices.Equal(rec.Members, w.Target):
		// Done once this node follows it too, so that what it shows of
		// the queue is the change applied.
		ms := w.q.membership.Load()
		w.done = ms.Target == nil && slices.Equal(ms.Members, rec.Members)
	default:
		// Another write made from the record this change was made from
		// landed first, and this change's was ignored: it is written
		// again, from the record as it is.
		w.v.defMu.Lock()
		defer w.v.defMu.Unlock()
		rec, raw, ok := r.liveQueueRecord(key, w.q.id)
		if !ok {
			w.Err, w.done = errQueueGone, true
		} else if !w.write(rec, raw, targetOf) {
			w.done = true // nothing left to change
		}
	}
}

// signal wakes every goroutine waiting on it (wait) each time notify is
// called.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next notify.
func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// liveQueueRecord is the stored record under key, and its stored form
// (raw: a membership write is conditional on it), if it is still queue
// id's.
func (r *Registry) liveQueueRecord(key, id string) (rec queueRecord, raw []byte, ok bool) {
	raw, live := r.cfg.Cluster.Get(key)
	if !live || json.Unmarshal(raw, &rec) != nil || rec.ID != id {
		return queueRecord{}, nil, false
	}
	return rec, raw, true
}

// followMembership brings q, a quorum queue already here, in line with
// its record's membership: a replica opened here if this node is to hold
// one, closed and deleted if it no longer is, and the replica told if it
// drives the change. Caller holds v.defMu.
func (v *VHost) followMembership(q *queue, rec queueRecord) {
	ms := &quorumMembership{Members: rec.Members, Target: rec.Target}
	q.membership.Store(ms)
	defer v.r.membersApplied.notify()
	self := v.r.nodeID()
	m := q.quorum.Load()
	switch {
	case m == nil && ms.holds(self) && !q.crashed.Load():
		v.openQuorumReplica(q, rec)
	case m != nil && !ms.holds(self):
		v.dropQuorumReplica(q, m)
	case m != nil:
		m.wake()
	}
}

// dropQuorumReplica closes and deletes this node's replica of q, no
// longer a member: q stays, a placeholder that reaches the leader.
func (v *VHost) dropQuorumReplica(q *queue, m *quorumReplica) {
	if err := m.store.Delete(); err != nil {
		v.r.logger.Warn("mq: deleting a quorum queue's replica failed", "queue", q.name, "vhost", v.name, "err", err)
	}
	<-m.done
	q.quorum.Store(nil)
	q.mu.Lock()
	q.store = nil
	q.mu.Unlock()
	v.r.logger.Info("mq: quorum queue replica removed from this node", "queue", q.name, "vhost", v.name)
}

// wake tells run the membership changed.
func (m *quorumReplica) wake() {
	select {
	case m.retarget <- struct{}{}:
	default:
	}
}

// membershipRetry is how often the leader retries a membership step
// (a learner catching up, a change Raft dropped).
const membershipRetry = 250 * time.Millisecond

// memberLag is how many entries behind the leader a member may be and
// count as caught up: under load a replica is never exactly level.
const memberLag = 64

// stepMembership, on the leader (run's goroutine), takes the next step
// of a new queue's leadership towards its first member, or of its group
// towards the target of a change in progress. It reports whether a step
// remains (run tries again after membershipRetry).
func (m *quorumReplica) stepMembership() bool {
	ms := m.q.membership.Load()
	switch {
	case ms.Target != nil:
		m.stepTowards(ms.Target)
		return true
	case m.preferredPending(ms):
		m.handToPreferred(ms)
		return true
	}
	return false
}

// stepTowards takes the next step of the queue's group towards target: a
// learner added, promoted, a member removed (or leadership handed on
// first), or the target recorded as the members. Each step is proposed
// again until the group's configuration shows it.
func (m *quorumReplica) stepTowards(target []int32) {
	gm := m.group.Membership()
	self := uint64(m.q.r.nodeID())
	current := slices.Concat(gm.Voters, gm.Learners)
	var err error
	defer func() {
		if err != nil {
			m.q.r.logger.Debug("mq: a quorum queue membership step failed; trying again", "queue", m.q.name, "err", err)
		}
	}()
	for _, id := range target {
		if !slices.Contains(current, uint64(id)) {
			err = m.group.AddLearner(uint64(id))
			return
		}
	}
	for _, id := range gm.Learners {
		if !slices.Contains(target, int32(id)) {
			err = m.group.RemoveMember(id)
			return
		}
	}
	if len(gm.Learners) > 0 {
		if id := m.caughtUp(gm.Learners, gm.CaughtUp, self); id != 0 {
			err = m.group.Promote(id)
		}
		return // every new member votes before any old one goes
	}
	for _, id := range gm.Voters {
		switch {
		case slices.Contains(target, int32(id)):
			continue
		case id == self:
			if to := m.caughtUp(gm.Voters, gm.CaughtUp, self); to != 0 && slices.Contains(target, int32(to)) {
				m.group.TransferLeadership(to)
			}
		default:
			err = m.group.RemoveMember(id)
		}
		return
	}
	m.completeMembership(target)
}

// caughtUp is one of ids, not self, within memberLag of the leader and
// in contact; 0 if none.
func (m *quorumReplica) caughtUp(ids []uint64, caughtUp func(id, lag uint64) bool, self uint64) uint64 {
	for _, id := range ids {
		if id != self && caughtUp(id, memberLag) && m.q.r.peerUp(int32(id)) {
			return id
		}
	}
	return 0
}

// completeMembership records target as the queue's members, once the
// group's voters are target, unless the record changed meanwhile (the
// queue deleted, or a new change written): then the write is ignored,
// and run steps on towards what the record says.
func (m *quorumReplica) completeMembership(target []int32) {
	q := m.q
	key := queueKey(q.vh.name, q.name)
	rec, raw, ok := q.r.liveQueueRecord(key, q.id)
	if !ok || !slices.Equal(rec.Target, target) {
		return // deleted, or recorded already
	}
	rec.Members, rec.Target = target, nil
	done := mustJSON(rec)
	if err := q.r.cfg.Cluster.PutIf(key, done, raw); err != nil {
		q.r.logger.Warn("mq: recording a quorum queue's new members failed; retrying", "queue", q.name, "err", err)
		return
	}
	if now, _ := q.r.cfg.Cluster.Get(key); bytes.Equal(now, done) {
		q.r.logger.Info("mq: quorum queue membership changed", "queue", q.name, "vhost", q.vh.name, "members", target)
	}
}
