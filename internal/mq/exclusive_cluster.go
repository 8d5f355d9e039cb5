package mq

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"
)

// Exclusive queues in a cluster (issue 14). In RabbitMQ an exclusive
// queue is usable by its connection alone, but a message published on
// any node is routed to it: pub/sub (a subscriber's exclusive
// server-named queue bound to an exchange) and RPC (a client's exclusive
// reply queue, which the server answers through the default exchange)
// rest on that. So in a cluster an exclusive queue is recorded in the
// definition store as a durable classic queue is (queueRecord.Node its
// home node), marked Exclusive, with its bindings from durable
// exchanges; every other node holds a placeholder of it
// (classicPlaceholder) that routes to it and forwards what is routed
// there, confirmed once the home node enqueued it (in memory: nothing is
// fsynced for it), and skips it while the home node is out of contact
// (classic_remote.go).
//
// Only the owning connection uses it: another node's placeholder has an
// owner no connection has (foreignOwner), so consuming, basic.get,
// purging, binding, deleting or declaring it there is 405
// RESOURCE_LOCKED, as for another connection's on its own node. When its
// connection closes, or it is auto-deleted or expires, its home node
// deletes its bindings' records, then its own, and every node follows.
// It does not outlive its node (RabbitMQ drops a node's transient queues
// when it goes down): the records a node finds of its own exclusive
// queues when it starts are from before, and it deletes them, with their
// bindings', once it caught up with the cluster (dropStaleExclusive);
// until then they stand for nothing (a deleted queue takes no message).
//
// Transient queues that are not exclusive stay their node's alone, as
// before: RabbitMQ 4.3 refuses them by default, and one of a name on
// each node (a dead-letter target of each node's, say) keeps working.

// foreignOwner owns the placeholder of another node's exclusive queue,
// and one of this node's from before it started: no connection of this
// node's has that id (ids count up from 1), and
// queueEquivalent's owner+1 does not wrap to "none".
const foreignOwner = ^ConnID(0) - 1

// exclusiveIDPrefix starts an exclusive queue's id (it has no storage
// directory): its home node tells by it that a message forwarded to one
// it deleted meanwhile was for an exclusive queue.
const exclusiveIDPrefix = "x-"

// forwardToDeletedExclusive reports whether req, made to this node for a
// queue it no longer has, forwards messages to an exclusive queue: those
// are dropped and confirmed at once, as RabbitMQ confirms a message whose
// queue was deleted before it got there (gone.go). Subscribers come and
// go (their queues with their connections): a publisher to their
// exchange is not nacked for that. A durable queue's is confirmed only
// once the home node caught up with its definitions: until then the
// queue may be one declared just now.
func forwardToDeletedExclusive(req *remoteRequest) bool {
	return req.Op == opPublish && strings.HasPrefix(req.Queue, exclusiveIDPrefix)
}

// staleQueues are the queues a node found recorded as its own exclusive
// ones when it started, to delete once it caught up.
type staleQueues struct {
	mu sync.Mutex
	qs []*queue
}

// recordsExclusive reports whether exclusive queues are recorded in the
// definition store: in a cluster only.
func (r *Registry) recordsExclusive() bool { return r.cfg.Cluster != nil }

// recorded reports whether q's definition (and those of its bindings from
// durable exchanges) is in the definition store.
func (q *queue) recorded() bool { return q.def.Durable || q.def.Exclusive && q.r.recordsExclusive() }

// foreignExclusive reports whether q is the placeholder of another node's
// exclusive queue. Only its home node deletes its records (no other may
// delete it): deleting the placeholder here, as this node follows, must
// not delete those of a queue of the same name declared since (a client
// that reconnected elsewhere), which its records' keys are.
func (q *queue) foreignExclusive() bool { return q.def.Exclusive && q.elsewhere() }

// exclusiveRecord is the definition-store record of d, an exclusive
// queue of this node (createQueue).
func (v *VHost) exclusiveRecord(d QueueDef, id string) (queueRecord, error) {
	args, err := encodeArgs(d.Args)
	return queueRecord{VHost: v.name, Name: d.Name, ID: id, Node: v.r.nodeID(), AutoDelete: d.AutoDelete, Args: args,
		Exclusive: true}, err
}

// exclusiveFromRecord builds what a record of an exclusive queue stands
// for here: another node's queue's placeholder, or, for one of this
// node's from before it started, a deleted queue kept until
// dropStaleExclusive deletes it and its bindings. Since, one of this
// node's stands for nothing (nil): its queue is in the vhost from the
// declare that writes its record to the delete that deletes it (both
// under defMu, which the follower holds from its read of a record to
// its apply: followInVHost), so a record of it found without it is
// stale. Built again, it would hold the name, taking nothing (a forward
// to it nacked, as if full), until the delete is followed.
func (v *VHost) exclusiveFromRecord(d QueueDef, qr queueRecord) *queue {
	d.Owner = foreignOwner // no connection's here
	if qr.Node != v.r.nodeID() {
		return v.classicPlaceholder(d, qr.ID, qr.Node)
	}
	if v.r.caughtUpAtStart() {
		return nil
	}
	q := v.newQueue(d, qr.ID)
	q.deleted = true
	v.r.stale.mu.Lock()
	v.r.stale.qs = append(v.r.stale.qs, q)
	v.r.stale.mu.Unlock()
	return q
}

// caughtUpAtStart reports whether this node, in a cluster, caught up
// with the cluster's definitions since it started (or its registry
// closed first).
func (r *Registry) caughtUpAtStart() bool {
	if r.follower == nil {
		return false
	}
	select {
	case <-r.follower.caughtUp:
		return true
	default:
		return false
	}
}

// dropStaleExclusive deletes the records of this node's exclusive queues
// from before it started, with their bindings' (catchUpAtStart): every
// node follows.
func (r *Registry) dropStaleExclusive() {
	r.stale.mu.Lock()
	qs := r.stale.qs
	r.stale.qs = nil
	r.stale.mu.Unlock()
	for _, q := range qs {
		v := q.vh
		v.defMu.Lock()
		var cleanup deletions
		err := v.deleteQueueLocked(q, &cleanup) // nothing if another record replaced it
		v.defMu.Unlock()
		cleanup.run(r)
		if err != nil {
			r.logger.Error("mq: delete an exclusive queue of this node's from before it started",
				"queue", q.name, "vhost", v.name, "err", err)
		}
	}
}

// A node removed from the cluster for good (wharf cluster remove-node)
// never starts again to drop its exclusive queues' records itself: other
// nodes would keep their placeholders, which route nothing while the node
// is out of contact but keep the name locked (405 to every declare).
// The node that carries out the removal drops them (PrepareRemoval), once
// the removal applied: before, the node may still serve them, and the
// removal may yet be refused. A node removing itself cannot write once
// removed: it asks another node in contact to (opAwaitRemoval). No other
// node drops them, so two never race to delete records a queue declared
// since has under the same keys.

// removalApplyWait bounds how long the node that carried out a removal
// waits for it to apply before it gives up dropping the removed node's
// exclusive queues' records (the removal failed after the hook ran).
const removalApplyWait = time.Minute

// removalCheck is how often it looks.
const removalCheck = 50 * time.Millisecond

// opAwaitRemoval asks a node to drop the Removed node's exclusive
// queues' records once its removal applied: the removed node's own ask.
const opAwaitRemoval remoteOp = "await-removal"

// PrepareRemoval readies node's removal from the cluster: the node's
// removal hook (broker.Broker.OnRemoveNode). It shrinks node off every
// quorum queue (ShrinkOff, which may refuse the removal), then has node's
// exclusive queues' records dropped once the removal applied (see above).
func (r *Registry) PrepareRemoval(ctx context.Context, node int32) error {
	if err := r.ShrinkOff(ctx, node); err != nil {
		return err
	}
	if node == r.nodeID() {
		r.handOverRemoval(ctx)
		return nil
	}
	r.dropExclusiveOnceRemoved(node)
	return nil
}

// handOverRemoval asks another node in contact, the lowest that answers,
// to drop this node's exclusive queues' records once its removal applied.
func (r *Registry) handOverRemoval(ctx context.Context) {
	self := r.nodeID()
	data, _ := json.Marshal(&remoteRequest{Op: opAwaitRemoval, Removed: self})
	for _, node := range r.cfg.Cluster.Nodes() {
		if node == self || !r.peerUp(node) || r.cfg.Cluster.CallNode == nil {
			continue
		}
		if _, err := r.cfg.Cluster.CallNode(ctx, node, data); err == nil {
			return
		}
	}
	r.logger.Warn("mq: no other node took over dropping this node's exclusive queues once it is removed; their names stay locked",
		"node", self)
}

// dropExclusiveOnceRemoved waits in the background for node's removal to
// apply, then drops its exclusive queues' records. A removal asked for
// again while one waits starts no second wait.
func (r *Registry) dropExclusiveOnceRemoved(node int32) {
	r.removals.mu.Lock()
	defer r.removals.mu.Unlock()
	if r.removals.waiting[node] || !r.proxies.add(1) {
		return
	}
	if r.removals.waiting == nil {
		r.removals.waiting = make(map[int32]bool)
	}
	r.removals.waiting[node] = true
	go func() {
		defer r.proxies.wg.Done()
		defer func() {
			r.removals.mu.Lock()
			delete(r.removals.waiting, node)
			r.removals.mu.Unlock()
		}()
		if r.awaitRemoved(node) {
			r.dropExclusiveOf(node)
		}
	}()
}

// removals are the nodes whose removal this node waits for to apply.
type removals struct {
	mu      sync.Mutex
	waiting map[int32]bool
}

// awaitRemoved waits until node is no longer among the cluster's nodes
// as this node applied them, up to removalApplyWait; false if it still
// is, or the registry closed.
func (r *Registry) awaitRemoved(node int32) bool {
	deadline := time.NewTimer(removalApplyWait)
	defer deadline.Stop()
	tick := time.NewTicker(removalCheck)
	defer tick.Stop()
	for slices.Contains(r.cfg.Cluster.Nodes(), node) {
		select {
		case <-r.proxies.ctx.Done():
			return false
		case <-deadline.C:
			r.logger.Warn("mq: a node's removal did not apply; its exclusive queues' records stay", "node", node)
			return false
		case <-tick.C:
		}
	}
	return true
}

// dropExclusiveOf deletes the records of node's exclusive queues, with
// their bindings', as their home node would have: every node follows.
// While a queue's record stands no other may be declared under its name
// (405), so the binding records under that name are its own.
func (r *Registry) dropExclusiveOf(node int32) {
	if err := r.cfg.Cluster.Barrier(); err != nil { // its placeholders as the cluster has them
		r.logger.Error("mq: cannot drop a removed node's exclusive queues", "node", node, "err", err)
		return
	}
	for _, v := range r.vhostList() {
		v.defMu.Lock()
		v.mu.RLock()
		var qs []*queue
		for _, q := range v.queues {
			if q.foreignExclusive() && q.home.Load() == node {
				qs = append(qs, q)
			}
		}
		v.mu.RUnlock()
		cleanup := deletions{orphans: true}
		for _, q := range qs {
			if err := v.deleteQueueLocked(q, &cleanup); err != nil {
				r.logger.Error("mq: delete a removed node's exclusive queue", "node", node, "queue", q.name,
					"vhost", v.name, "err", err)
			}
		}
		v.defMu.Unlock()
		cleanup.run(r)
		if len(qs) > 0 {
			r.logger.Info("mq: a removed node's exclusive queues dropped", "node", node, "vhost", v.name, "queues", len(qs))
		}
	}
}
