package mq

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/queuestore"
	"github.com/wharf-mq/wharf/internal/quorumstore"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Classic queues of other nodes (issue 14). A durable classic queue lives
// on the node that declared it, its home node, and never moves (RabbitMQ
// 4 mirrors none). Every other node reaches it there as it reaches a
// quorum queue's leader (quorum_proxy.go, quorum_calls.go), with the home
// node as a leader that never changes: a message routed to it is
// forwarded there and confirmed once the home node has it durable (a
// transient one: once it is enqueued there), under an id the home node
// takes it once by (in memory: a repeat after the home node restarted is
// enqueued again, at least once as in RabbitMQ, see docs/replication.md);
// consumers and basic.get are sessions there; purge,
// delete and a declare's counts are calls. A classic queue has no Raft
// group, so the calls go to the home node itself (ClusterConfig.CallNode,
// answered by answerCall), not to a group's replica.
//
// While the home node is out of contact, declaring (passively or not),
// consuming, getting, purging and a conditional delete answer RabbitMQ's
// 404 "home node ... is down or inaccessible" (errHomeNodeDown); the
// queue takes no message routed to it (unroutable if no other queue
// takes it: returned if mandatory, confirmed), as RabbitMQ 3.10.8
// treats a classic queue on a down node in a 3-node cluster; and its
// consumers on other nodes are cancelled (basic.cancel), as RabbitMQ
// cancels consumers of a queue whose node went down: what they held is
// returned by the home node (at once, or after its restart, from its
// log). A message forwarded when the home node goes is nacked: its
// outcome is unknown.

// errHomeUnreachable fails a call to a classic queue whose home node is
// out of contact.
var errHomeUnreachable = errors.New("mq: the classic queue's home node is out of contact")

// errClassicRefused answers a forward the home node did not take: the
// queue is full (x-overflow reject-publish) or was deleted. The
// forwarding node nacks.
var errClassicRefused = errors.New("mq: the classic queue's home node did not take the forwarded message (full, or deleted)")

// classic reports whether rq reaches a classic queue (on its home node,
// q.home), not a quorum queue's leader.
func (rq *remoteQueue) classic() bool { return rq.q.membership.Load() == nil }

// homeDown reports whether rq is a classic queue's, whose home node is
// out of contact.
func (rq *remoteQueue) homeDown() bool {
	return rq.classic() && !rq.q.r.peerUp(rq.q.home.Load())
}

// classicPlaceholder builds this node's view of a durable classic queue
// living on node: it holds nothing itself and reaches the queue there
// (when the cluster gives it calls; else it only refuses, like a crashed
// queue).
func (v *VHost) classicPlaceholder(d QueueDef, id string, node int32) *queue {
	q := v.newQueue(d, id)
	q.home.Store(node)
	q.deleted = true
	if v.r.cfg.Cluster.CallNode != nil {
		q.remote = v.r.newRemoteQueue(q)
	}
	return q
}

// declared is what a declare of the existing queue q answers: its counts,
// asked of its home node if it lives on another (404 if that is out of
// reach). It counts as a use for x-expires.
func (q *queue) declared() (QueueInfo, error) {
	if q.remote == nil || !q.remote.classic() {
		q.touch()
		return q.info(), nil
	}
	reply, err := q.remote.ask(&remoteRequest{Op: opInfo})
	if err != nil {
		return QueueInfo{}, err
	}
	return QueueInfo{Name: q.name, Messages: reply.Count, Consumers: reply.Consumers}, nil
}

// purgeRemote is queue.purge of a classic queue on its home node.
func (rq *remoteQueue) purgeRemote() (int, error) {
	reply, err := rq.ask(&remoteRequest{Op: opPurge})
	if err != nil {
		return 0, err
	}
	return reply.Count, nil
}

// deleteRemote is queue.delete of a classic queue of another node: on its
// home node, which checks ifUnused and ifEmpty against the queue itself
// and deletes its definition; this node follows the deletion before it
// answers. While the home node is out of contact the conditions cannot
// be checked (404, as RabbitMQ answers), but a plain delete goes through
// the definitions alone, so that the queues of a node that is gone for
// good can still be deleted.
func (rq *remoteQueue) deleteRemote(ifUnused, ifEmpty bool) (int, error) {
	q := rq.q
	if rq.homeDown() && !ifUnused && !ifEmpty {
		return q.vh.deleteHere(q.name, false, false, 0)
	}
	// Not rq.ctx: this node may follow the delete, which ends rq, before
	// the answer comes.
	ctx, cancel := context.WithTimeout(q.r.proxies.ctx, syncWaitRemote)
	defer cancel()
	reply, err := rq.call(ctx, &remoteRequest{Op: opDelete, Queue: q.id, IfUnused: ifUnused, IfEmpty: ifEmpty})
	if err != nil {
		return 0, errUnreachable(q, err)
	}
	if err := replyError(reply); err != nil && reply.Code != amqpwire.CodeNotFound { // 404: deleted there already
		return 0, err
	}
	q.r.catchUp(queueKey(q.vh.name, q.name))
	return reply.Count, nil
}

// ask makes a call for a client and returns the answer, or the error
// that refuses the request.
func (rq *remoteQueue) ask(req *remoteRequest) (*remoteReply, error) {
	req.Queue = rq.q.id
	ctx, cancel := context.WithTimeout(rq.ctx, syncWaitRemote)
	defer cancel()
	reply, err := rq.call(ctx, req)
	if err != nil {
		return nil, errUnreachable(rq.q, err)
	}
	if err := replyError(reply); err != nil {
		return nil, err
	}
	return reply, nil
}

// answerCall answers a call another node made to this one
// (ClusterConfig.HandleCalls): a request to a classic queue that lives
// here, for the figures of the queues this node serves, about its
// clients (answerClients), or for its direct reply-to consumers.
func (r *Registry) answerCall(ctx context.Context, _ int32, data []byte) ([]byte, error) {
	var req remoteRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	switch req.Op {
	case opStats:
		return json.Marshal(&remoteReply{Figures: r.servedFiguresOf(req.Served)})
	case opAwaitRemoval:
		r.dropExclusiveOnceRemoved(req.Removed)
		return json.Marshal(&remoteReply{})
	case opReplies:
		r.deliverForwarded(req.Replies)
		return json.Marshal(&remoteReply{})
	case opReplyExists:
		return json.Marshal(r.answerReplyExists(&req))
	case opConsumers, opConnections, opClientTotals, opCloseConnection, opLocalQueues, opLocalExchanges, opLocalTotals,
		opLocalBindings, opUnbindLocal:
		return r.answerClients(data)
	}
	return json.Marshal(r.serveClassic(ctx, &req))
}

// serveClassic answers req on the classic queue's home node.
func (r *Registry) serveClassic(ctx context.Context, req *remoteRequest) *remoteReply {
	if r.closed.Load() {
		return &remoteReply{NotServed: true}
	}
	q := r.queueNamed(req.VHost, req.Name)
	caughtUp := false
	if (q == nil || q.id != req.Queue) && !forwardToDeletedExclusive(req) {
		// Declared here just now, by a declare that has not added it
		// yet: another node that lost the race to declare it asks for
		// its counts (createDefinition). Not for a forward to an
		// exclusive queue: nothing is routed to one before its
		// declare-ok (its bindings come after), so one missing here was
		// deleted, and subscribers leaving must not cost a barrier per
		// late message.
		if caughtUp = r.catchUp(queueKey(req.VHost, req.Name)); caughtUp {
			q = r.queueNamed(req.VHost, req.Name)
		}
	}
	switch {
	case (q == nil || q.id != req.Queue) && req.Op == opPublish && (caughtUp || forwardToDeletedExclusive(req)):
		// Deleted (and maybe declared again) before the forward came:
		// dropped, confirmed (gone.go).
		return &remoteReply{}
	case q == nil || q.id != req.Queue:
		return errorReply(errNotFound("queue", req.Name, req.VHost)) // deleted (and maybe declared again)
	case q.membership.Load() != nil || q.stream != nil || q.elsewhere():
		return &remoteReply{NotServed: true} // not a classic queue of this node
	}
	return q.classicCalls().serve(ctx, req)
}

// queueNamed returns the queue name of vhost, nil if there is none.
func (r *Registry) queueNamed(vhost, name string) *queue {
	r.mu.RLock()
	v := r.vhosts[vhost]
	r.mu.RUnlock()
	if v == nil {
		return nil
	}
	return v.queue(name)
}

// classicCalls is what answers other nodes' calls to q, a classic queue of
// this node, made at the first.
func (q *queue) classicCalls() *served {
	if s := q.calls.Load(); s != nil {
		return s
	}
	q.calls.CompareAndSwap(nil, &served{q: q, take: q.takeForward})
	return q.calls.Load()
}

// endClassicSessions ends, at Close, the sessions other nodes hold on
// this node's classic queues, and their expiry timers: what they held
// stays unsettled in the queues' logs, delivered again after a restart.
func (r *Registry) endClassicSessions() {
	r.mu.RLock()
	var qs []*queue
	for _, v := range r.vhosts {
		v.mu.RLock()
		for _, q := range v.queues {
			if q.calls.Load() != nil {
				qs = append(qs, q)
			}
		}
		v.mu.RUnlock()
	}
	r.mu.RUnlock()
	for _, q := range qs {
		for _, s := range q.calls.Load().sessions.takeAll() {
			s.end(false)
		}
	}
}

// takeForward publishes into q, a classic queue of this node, the
// messages another node forwarded, and returns once the persistent ones
// are durable (served.take).
func (q *queue) takeForward(batches []byte, _ uint64, _ quorumstore.Forward) error {
	var targets []replica.Target
	err := quorumstore.Forwarded(batches, func(batch []byte, ts int64, sm queuestore.Message) error {
		msg, err := decodeStored(sm)
		if err != nil {
			return err
		}
		var stored *storedMessage
		if q.logs(msg) { // a transient message lives in memory only
			stored = &storedMessage{msg: sm, at: ts, batch: batch}
		}
		out, logged, _, err := q.publish(&held{msg: msg, size: int64(len(msg.Body))}, stored, ts, false)
		switch {
		case err != nil:
			return err
		case out != taken:
			return errClassicRefused
		}
		if logged != nil && !slices.Contains(targets, logged) {
			targets = append(targets, logged)
		}
		return nil
	})
	for _, t := range targets {
		if err != nil {
			break
		}
		err = t.Sync()
	}
	return err
}
