package mq

import "github.com/wharf-mq/wharf/internal/replica"

// Confirms of messages whose queue went (issue 14). RabbitMQ's channel
// confirms the messages a deleted queue had not confirmed yet
// (rabbit_channel, on the queue's eol event: "Deleted queue is a special
// case. Do not nack the rejected messages"): the queue is gone with what
// it held, and a publisher that republished a nacked message would only
// find it unroutable. Here a message routed to a queue that is deleted,
// or replaced by a declaration of its name under a new id, before its
// confirm came (its fsync, its quorum commit, its forward's answer) is
// confirmed the same way (queue.gone), wherever the deletion caught it:
//
//   - a durable classic queue's store deleted: queuestore's Store.Sync
//     confirms it;
//   - a stream queue deleted: its held-back records are dropped and
//     confirmed (Publisher.appendPending);
//   - a quorum queue deleted on its leader, here: goneTarget;
//   - a forward whose queue this node deleted (or followed the deletion
//     of) meanwhile: remoteForward.Sync; also one whose deletion this
//     node's metadata applied but its registry did not follow yet
//     (recordGone): the queue's group, which its members deleted, answers
//     no call, and the forward would otherwise wait for its timeout and
//     be nacked;
//   - a forward reaching a leader or home node that deleted the queue:
//     the answer confirms it (served.serve), and serveClassic confirms
//     one for a classic queue it does not have once it caught up with the
//     definitions (without that, the queue may be one declared just now).
//
// A confirm that fails while the queue is still there (no quorum, a
// storage error, the registry closing) is a nack, as before.

// goneTarget is what a client's confirm of a message logged in a quorum
// queue's replica on its leader waits for: the service of the term, t,
// whose failure does not count once the queue is gone (its replica
// deleted, the log closed under the proposal).
type goneTarget struct {
	q *queue
	t replica.Target
}

func (g *goneTarget) Sync() error {
	if err := g.t.Sync(); err != nil && !g.q.gone.Load() {
		return err
	}
	return nil
}

// confirmTarget wraps t, the target of a message just logged in m's
// store, as a goneTarget: one per service, so that the syncer and
// Publisher, which take each target once, still sync it once a round.
func (m *quorumReplica) confirmTarget(t replica.Target) replica.Target {
	if g := m.confirm.Load(); g != nil && g.t == t {
		return g
	}
	g := &goneTarget{q: m.q, t: t}
	m.confirm.Store(g) // racing publishers may each make one: the service is synced twice, no harm
	return g
}

// recordGone reports whether q's definition, as this node applied the
// metadata, is deleted or another queue's (declared again): this node is
// about to delete q too. A forward that finds it so ends with
// errQueueGone.
func (q *queue) recordGone() bool {
	_, _, ok := q.r.liveQueueRecord(queueKey(q.vh.name, q.name), q.id)
	return !ok
}
