package mq

import (
	"context"
	"hash/fnv"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/quorumstore"
	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Quorum queues in a cluster (issue 14): one Raft group per queue over
// its members (x-quorum-initial-group-size nodes, default min(3, nodes)),
// recorded with the queue's definition (queueRecord.Members and Group)
// so that every node knows them; each member node opens its replica, a
// quorumstore.Store, and runs a quorumReplica for it. The queue is
// served on the node whose replica leads the group: there the queue
// takes over from the committed log (quorumstore's Replay) and logs
// every change of a message's fate as a command, and hands a message out
// only once its enqueue is committed. On every other node, member or
// not, the queue is a placeholder that reaches the leader through calls
// (quorum_calls.go, quorum_proxy.go): a message routed to it there is
// forwarded to the leader (forwards, takeForwarded) and confirmed once
// committed; consumers and basic.get pull through the leader; purging
// gets a 404 that names the leader's node. When the leader moves away,
// the queue stops serving here: its consumers here are cancelled
// (basic.cancel; those of other nodes follow the leader), and the
// messages they held are returned by the new leader, with
// x-delivery-count incremented.

// quorumLeaderUnknown is queue.home for a quorum queue whose leader this
// node does not know.
const quorumLeaderUnknown = -1

// quorumGroup is the Raft group of the quorum queue stored as id, the
// same on every node: a hash with the top bit set (as partitions' groups
// are, so that it never meets the metadata group).
func quorumGroup(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte("amqp-quorum-queue/" + id))
	return h.Sum64() | 1<<63
}

// quorumQueue builds a quorum queue of the cluster from its record: on a
// member node (or one a membership change adds) with its replica opened
// and followed (the queue serves once this replica leads), elsewhere a
// placeholder. It reports whether this node holds a replica.
func (v *VHost) quorumQueue(def QueueDef, qr queueRecord) (*queue, bool) {
	q := v.newQueue(def, qr.ID)
	q.membership.Store(&quorumMembership{Members: qr.Members, Target: qr.Target})
	q.deleted = true // until this replica leads
	q.home.Store(quorumLeaderUnknown)
	if v.r.cfg.Cluster.Call != nil {
		q.remote = v.r.newRemoteQueue(q)
	}
	if !q.membership.Load().holds(v.r.nodeID()) {
		return q, false
	}
	v.openQuorumReplica(q, qr)
	return q, true
}

// openQuorumReplica opens this node's replica of q's group and follows
// it. A node the record's members do not name yet joins the group: its
// replica starts empty and learns the group's members and log from the
// leader.
func (v *VHost) openQuorumReplica(q *queue, qr queueRecord) {
	self := v.r.nodeID()
	members := qr.Members
	joining := !slices.Contains(members, self)
	if joining {
		members = nil
	}
	dir := filepath.Join(v.r.cfg.DataDir, queuesDirName, qr.ID)
	log, err := v.r.cfg.Cluster.OpenQuorumLog(dir, qr.Group, members, v.r.quorumLogConfig())
	if err != nil {
		q.crashed.Store(true)
		v.r.logger.Error("mq: quorum queue out of service: its replica cannot be opened; other queues are not affected",
			"queue", q.name, "vhost", v.name, "dir", dir, "err", err)
		return
	}
	s := quorumstore.Open(log, v.r.logger.With("queue", q.name, "vhost", v.name))
	q.mu.Lock()
	q.store = s
	q.mu.Unlock()
	m := v.r.startQuorumReplica(q, s, log)
	log.SetForwardHandler(m.takeForwarded) // a raw forwarded proposal would bypass the queue's offsets
	log.SetCallHandler(m.answer)
}

// quorumLogConfig is the settings of quorum queues' logs: segments of the
// queue logs' size, so that truncation frees disk in steps of it, and no
// retention (commands go when a truncate covers them).
func (r *Registry) quorumLogConfig() replica.Config {
	cfg := replica.DefaultConfig()
	cfg.SegmentBytes = r.cfg.SegmentBytes
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	return cfg
}

// errQuorumElsewhere is the answer of a node that does not serve a quorum
// queue to what it does not reach the leader for (queue.purge): its
// leader is elsewhere (or not elected).
func errQuorumElsewhere(q *queue) *Error {
	res := resource("queue", q.name, q.vh.name)
	if leader := q.home.Load(); leader > 0 {
		return amqpwire.Errorf(amqpwire.CodeNotFound,
			"%s is a quorum queue led by node '%s': do this on that node", res, NodeName(leader))
	}
	return amqpwire.Errorf(amqpwire.CodeNotFound,
		"%s is a quorum queue on nodes %s and has no leader this node knows of", res, memberNames(q))
}

// memberNames lists a quorum queue's nodes for an error text.
func memberNames(q *queue) string {
	members := q.members()
	nodes := make([]string, len(members))
	for i, m := range members {
		nodes[i] = "'" + NodeName(m) + "'"
	}
	return strings.Join(nodes, ", ")
}

// quorumReplica is this node's member of a quorum queue's group: it
// follows the group's leadership and serves the queue while this
// replica leads (run, one goroutine, which ends when the store closes).
type quorumReplica struct {
	q     *queue
	store *quorumstore.Store
	group *raft.Group
	// retarget wakes run when the queue's membership changed (one
	// token).
	retarget chan struct{}
	// serving is the term the queue is served in here, 0 if it is not
	// (run's goroutine only).
	serving uint64
	// placed is closed once the replica knows where the queue is served:
	// here, or on a known leader (a declare waits for it).
	placed     chan struct{}
	placedOnce sync.Once
	done       chan struct{}
	// served answers other nodes' calls: their consumers of the queue
	// while it is served here, their forwarded publishes
	// (quorum_calls.go).
	*served
	// confirm is the confirm target of the last service clients'
	// messages were logged in (gone.go).
	confirm atomic.Pointer[goneTarget]
}

// startQuorumReplica starts following q's group.
func (r *Registry) startQuorumReplica(q *queue, s *quorumstore.Store, log *replica.RaftLog) *quorumReplica {
	m := &quorumReplica{q: q, store: s, group: log.Group(), retarget: make(chan struct{}, 1),
		placed: make(chan struct{}), done: make(chan struct{})}
	m.served = &served{q: q, take: m.takeForward}
	q.quorum.Store(m)
	r.quorumMu.Lock()
	r.quorumReplicas[m] = struct{}{}
	r.quorumMu.Unlock()
	go func() {
		m.run()
		r.quorumMu.Lock()
		delete(r.quorumReplicas, m)
		r.quorumMu.Unlock()
	}()
	return m
}

// closeQuorumReplicas closes every quorum replica of this node and waits
// for their goroutines.
func (r *Registry) closeQuorumReplicas() {
	r.quorumMu.Lock()
	ms := make([]*quorumReplica, 0, len(r.quorumReplicas))
	for m := range r.quorumReplicas {
		ms = append(ms, m)
	}
	r.quorumMu.Unlock()
	for _, m := range ms {
		if err := m.store.Close(); err != nil {
			r.logger.Warn("mq: closing a quorum queue's replica", "queue", m.q.name, "err", err)
		}
		<-m.done
	}
}

// failedRetry is how long a replica whose proposals were refused waits
// before it takes over again.
const failedRetry = 100 * time.Millisecond

// run serves the queue while this replica leads, until the store closes.
func (m *quorumReplica) run() {
	defer close(m.done)
	defer m.stepDown(quorumLeaderUnknown)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-m.store.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(quorumstore.TruncateEvery) // so that an idle queue's log is cut too
	defer tick.Stop()
	var truncated time.Time
	for {
		changed, failed := m.store.Changed(), m.store.Failed()
		id, term, leading := m.store.Leadership()
		leader := int32(id)
		if leader == m.q.r.nodeID() {
			leader = quorumLeaderUnknown // about to lead, or not yet serving
		}
		switch {
		case leading && m.serving != term:
			m.stepDown(leader)
			if err := m.takeOver(ctx, term); err != nil {
				m.q.r.logger.Warn("mq: taking over a quorum queue failed", "queue", m.q.name, "vhost", m.q.vh.name, "err", err)
			}
		case !leading:
			m.stepDown(leader)
		}
		if m.serving != 0 {
			m.dispatchCommitted()
		}
		if m.serving != 0 && time.Since(truncated) >= quorumstore.TruncateEvery {
			m.truncateSettled()
			truncated = time.Now()
		}
		if (m.serving != 0 || leader > 0) && !m.preferredPending(m.q.membership.Load()) {
			m.placedOnce.Do(func() { close(m.placed) })
		}
		var nextStep <-chan time.Time
		if m.serving != 0 && m.stepMembership() {
			nextStep = time.After(membershipRetry)
		}
		select {
		case <-m.store.Done():
			return
		case <-changed:
		case <-tick.C:
		case <-m.retarget:
		case <-nextStep:
		case <-failed:
			m.stepDown(quorumLeaderUnknown)
			select {
			case <-m.store.Done():
				return
			case <-time.After(failedRetry):
			}
		}
	}
}

// takeOver rebuilds the queue from the committed log and serves it here
// in term.
func (m *quorumReplica) takeOver(ctx context.Context, term uint64) error {
	if err := m.store.Replay(ctx); err != nil {
		return err
	}
	m.forwards.recall(m.store.Forwards(), time.Now()) // before it answers a repeat of one
	q := m.q
	q.mu.Lock()
	err := q.loadUnsettled()
	if err == nil {
		q.deleted = false
		q.home.Store(0)
		q.touchLocked()
		q.armHeadsLocked()
		m.serving = term
	}
	q.unlock()
	if err == nil {
		q.r.logger.Info("mq: quorum queue served here", "queue", q.name, "vhost", q.vh.name, "term", term)
	}
	return err
}

// confirmTargetLocked is what a confirm of a message q logged just now
// waits for: the store, or a quorum queue's service of the term it is
// served in (quorumstore.Store.TargetLocked). Caller holds q.mu.
func (q *queue) confirmTargetLocked() replica.Target {
	if m := q.quorum.Load(); m != nil {
		return m.store.TargetLocked()
	}
	return q.store
}

// uncommittedLocked reports whether e is a message of a quorum queue of
// the cluster whose enqueue is not committed yet: it is not handed out
// before (a new leader might not have it). Caller holds q.mu.
func (q *queue) uncommittedLocked(e *entry) bool {
	m := q.quorum.Load()
	return m != nil && e.offset >= m.store.HighWatermark()
}

// dispatchCommitted offers the messages committed since the last call.
func (m *quorumReplica) dispatchCommitted() {
	m.q.mu.Lock()
	m.q.dispatchLocked(nil)
	m.q.unlock()
}

// truncateSettled proposes to cut the queue's log below its lowest
// unsettled message (quorumstore's truncate.go), but not below the
// messages of the forwards remembered (forwardMemory): a new leader
// recalls them from the log.
func (m *quorumReplica) truncateSettled() {
	q := m.q
	q.mu.Lock()
	below := int64(math.MaxInt64)
	for l := range q.ready.levels {
		if d := &q.ready.levels[l]; d.Len() > 0 { // each level in offset order
			below = min(below, d.Front().offset)
		}
	}
	for _, e := range q.unacked {
		below = min(below, e.offset)
	}
	m.store.TruncateLocked(below, forwardMemory)
	q.mu.Unlock()
}

// stepDown stops serving the queue here, if it was served, and records
// which node leads (quorumLeaderUnknown if none is known).
func (m *quorumReplica) stepDown(leader int32) {
	q := m.q
	if leader <= 0 {
		leader = quorumLeaderUnknown
	}
	q.home.Store(leader)
	if m.serving == 0 {
		return
	}
	m.serving = 0
	q.mu.Lock()
	var follow []*proxySession
	if q.remote != nil && !q.r.closed.Load() {
		follow = q.remote.followLeaderLocked()
	}
	cancelled := q.markDeletedLocked()
	q.mu.Unlock()
	if len(follow) > 0 {
		cancelled = nil // they consume through the new leader instead
	}
	for _, s := range follow {
		s.run()
	}
	for _, s := range m.sessions.takeAll() {
		s.end(false) // the new leader returns what they held
	}
	for _, cb := range cancelled {
		cb()
	}
	q.r.logger.Info("mq: quorum queue no longer served here", "queue", q.name, "vhost", q.vh.name, "leader", leader)
}

// awaitPlaced waits, for a declare, until the queue's replica here knows
// where the queue is served (bounded: a declare does not wait for a
// quorum that is not there).
func (q *queue) awaitPlaced() {
	m := q.quorum.Load()
	if m == nil {
		return
	}
	select {
	case <-m.placed:
	case <-m.done:
	case <-time.After(placementWait):
	}
}

// placementWait bounds how long a declare waits for a new quorum
// queue's group to elect a leader.
const placementWait = 10 * time.Second
