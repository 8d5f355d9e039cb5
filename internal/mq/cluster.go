package mq

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq/routing"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Definitions in a cluster (issue 14). The definition store is the
// cluster's replicated metadata log: a declare on one node returns once
// the metadata group committed it and that node applied it, and every
// other node applies it as it commits. Each node's registry follows the
// store: it hears of every applied key (ClusterConfig.Watch) and brings
// its vhosts, exchanges, queues, bindings and policies in line with the
// key's live value, on one goroutine of its own (follow), in commit
// order. Following is idempotent: on the node that wrote a definition
// the registry already made the change (under the vhost's defMu, which
// following takes too), so there it finds nothing to do.
//
// A lookup that misses (a passive declare, a bind, a publish to an
// unknown exchange, a consume) first waits for the cluster (Barrier) and
// follows the key it needs, so a declare that completed on one node is
// seen at once on every other.
//
// Durable classic queues live on the node that declared them
// (queueRecord.Node), their home node, as RabbitMQ 4's do. On the other
// nodes such a queue is a placeholder (queue.home) that reaches it there
// through node calls (classic_remote.go): routing sees it, and a message
// routed to it is forwarded to the home node (confirmed once durable
// there); consuming, basic.get, purging, a declare's counts and deleting
// are the home node's. While the home node is out of contact they get
// RabbitMQ's 404 for a queue whose home node is down or inaccessible, and
// a message routed to it is not routed there, as in RabbitMQ. Quorum
// queues are replicated, served on their group's leader
// (quorum_cluster.go) and reached from every node through it
// (quorum_proxy.go), by the same machinery.
// Transient exchanges and queues are not in the definition store: they
// exist only on the node that declared them. Exclusive queues are,
// marked as such, reached from every node as durable classic queues are
// (exclusive_cluster.go).
//
// A new durable queue or exchange is created only if its name has no
// definition when the write is applied (createDefinition): of two nodes
// declaring the same name at once, the first write applied creates it,
// on every node, and the other node's is ignored; that node then answers
// as a declare of the existing queue or exchange (declare-ok if
// equivalent, else 406), as RabbitMQ's transaction does. The declaration
// writes its record before it creates anything else (a quorum queue's
// group), so the loser has nothing to undo.

// ClusterConfig makes a registry one node's view of a cluster's
// definitions. The node wires it to the broker's definition store.
type ClusterConfig struct {
	// NodeID is this node's id: queues it declares live here.
	NodeID int32
	// Watch registers a function called with the key of every definition
	// this node applies, in commit order, once Get returns its new value.
	// It must not block (it runs on the store's apply loop).
	Watch func(fn func(key string))
	// Get returns a key's live value.
	Get func(key string) ([]byte, bool)
	// PutIf stores value under key if, when each node applies the write,
	// key's live value is prev (prev nil: key has none); else every node
	// ignores it. It returns once this node applied or ignored it
	// (broker.DefinitionStore.PutIf).
	PutIf func(key string, value, prev []byte) error
	// Barrier returns once this node applied every definition committed
	// anywhere before the call.
	Barrier func() error
	// Nodes returns the ids of the cluster's current nodes, this one
	// included (joined ones too, removed ones not), sorted: new quorum
	// queues' members are placed on them.
	Nodes func() []int32
	// OpenQuorumLog opens this node's replica of a quorum queue's Raft
	// group in dir, whose members are members, with the log settings cfg
	// (quorum_cluster.go).
	OpenQuorumLog func(dir string, group uint64, members []int32, cfg replica.Config) (*replica.RaftLog, error)
	// Call sends a request to the owner of node's replica of a quorum
	// queue's group and returns its answer (quorum_remote.go): how a node
	// reaches a quorum queue led elsewhere.
	Call func(ctx context.Context, group uint64, node int32, data []byte) ([]byte, error)
	// PeerUp reports whether node is in contact (this node is).
	PeerUp func(node int32) bool
	// CallNode sends a request to node's registry and returns its answer
	// (which HandleCalls installed there): how a node reaches a classic
	// queue that lives on another (classic_remote.go).
	CallNode func(ctx context.Context, node int32, data []byte) ([]byte, error)
	// HandleCalls installs what answers the requests other nodes send
	// this one with CallNode; nil at Close.
	HandleCalls func(fn func(ctx context.Context, from int32, data []byte) ([]byte, error))
}

// createDefinition stores value under key unless key has a definition
// when the write is applied: in a cluster another node's declaration of
// the name may have landed first (see the top of this file). It returns
// key's value as this node applied it: value if created, else the
// definition that was there. On a single node the caller, holding the
// vhost's defMu, knows the name is new, and value is stored as is.
func (r *Registry) createDefinition(key string, value []byte) ([]byte, error) {
	if r.cfg.Cluster == nil {
		return value, r.defs.Put(key, value)
	}
	for {
		if err := r.cfg.Cluster.PutIf(key, value, nil); err != nil {
			return nil, err
		}
		if live, ok := r.cfg.Cluster.Get(key); ok {
			return live, nil
		}
		// The definition that was there was deleted since: create it
		// again.
	}
}

// follower queues the keys the store applied for the registry's follow
// goroutine.
type follower struct {
	mu      sync.Mutex
	pending []string
	wake    chan struct{} // one token: keys or a barrier are pending
	stop    chan struct{}
	done    chan struct{}

	// barrier is the barrier lookups that missed wait for, run next by
	// follow: a burst of misses shares one write to the metadata log
	// (each costs a Raft round and stays in the log).
	barrier *barrierCall
	// caughtUp is closed once follow caught up at start (or gave up,
	// closing): see awaitCaughtUp.
	caughtUp chan struct{}
}

type barrierCall struct {
	done chan struct{}
	err  error
	// followed is closed once follow followed every key this node
	// applied before the barrier returned (catchUpAll).
	followed chan struct{}
}

func newFollower() *follower {
	return &follower{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		caughtUp: make(chan struct{})}
}

// add queues key; it never blocks.
func (f *follower) add(key string) {
	if !strings.HasPrefix(key, keyPrefix) {
		return // another core's definition
	}
	f.mu.Lock()
	f.pending = append(f.pending, key)
	f.mu.Unlock()
	f.signal()
}

func (f *follower) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// take returns the keys queued so far.
func (f *follower) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := f.pending
	f.pending = nil
	return keys
}

// barrierWait bounds how long a lookup waits for a barrier: follow runs
// none until this node caught up at start, which needs a quorum.
const barrierWait = 30 * time.Second

// awaitBarrier asks follow for a barrier that starts after the call and
// returns it, run, or the error that ended the wait (wait at most).
func (f *follower) awaitBarrier(wait time.Duration) (*barrierCall, error) {
	f.mu.Lock()
	if f.barrier == nil {
		f.barrier = &barrierCall{done: make(chan struct{}), followed: make(chan struct{})}
	}
	c := f.barrier
	f.mu.Unlock()
	f.signal()
	select {
	case <-c.done:
		return c, c.err
	case <-f.stop:
		return nil, ErrClosed
	case <-time.After(wait):
		return nil, errors.New("mq: no quorum of the metadata group")
	}
}

// runBarrier runs the barrier asked for, if any, and returns it.
func (f *follower) runBarrier(barrier func() error) *barrierCall {
	f.mu.Lock()
	c := f.barrier
	f.barrier = nil
	f.mu.Unlock()
	if c != nil {
		c.err = barrier()
		close(c.done)
	}
	return c
}

// follow catches up with the cluster, then applies the keys the store
// applies, until Close.
func (r *Registry) follow() {
	defer close(r.follower.done)
	caughtUp := r.catchUpAtStart()
	close(r.follower.caughtUp)
	if !caughtUp {
		return
	}
	for {
		select {
		case <-r.follower.stop:
			return
		case <-r.follower.wake:
		}
		c := r.follower.runBarrier(r.cfg.Cluster.Barrier)
		for _, key := range r.follower.take() {
			r.followDefinition(key)
		}
		if c != nil {
			close(c.followed) // every key applied before it returned was taken above
		}
	}
}

// catchUpAtStart waits until this node applied every definition the
// cluster committed before it started (its own replica of the metadata
// log may have lagged), follows them, and only then sets aside the queue
// directories no definition names: a queue declared here whose definition
// this node had not applied yet when it stopped keeps its data. It
// reports false if the registry closed first.
func (r *Registry) catchUpAtStart() bool {
	for {
		err := r.cfg.Cluster.Barrier()
		if err == nil {
			break
		}
		r.logger.Warn("mq: cannot reach the cluster's metadata yet; retrying", "err", err)
		select {
		case <-r.follower.stop:
			return false
		case <-time.After(time.Second):
		}
	}
	for _, key := range r.follower.take() {
		r.followDefinition(key)
	}
	r.dropStaleExclusive()
	r.setAsideStrays()
	return true
}

// setAsideStrays sets aside the store directories of no queue of this
// node's, with every vhost's definitions held still, so that no queue is
// created meanwhile.
func (r *Registry) setAsideStrays() {
	r.mu.RLock()
	defer r.mu.RUnlock()
	live := make(map[string]bool)
	for _, v := range r.vhosts {
		v.defMu.Lock()
		defer v.defMu.Unlock()
		for _, q := range v.queues {
			if q.store != nil {
				live[q.id] = true
			}
		}
	}
	r.stores.SetAsideStrays(live)
}

// awaitCaughtUp holds a publish on a node that has not caught up with the
// cluster's definitions since it started (bounded by barrierWait): its
// replica of the metadata log may lag what it had applied before a
// SIGKILL, and a message routed by definitions that miss a queue would be
// unroutable, which is confirmed, and lost. On a single node it returns
// at once.
func (r *Registry) awaitCaughtUp() {
	if r.follower == nil {
		return
	}
	select {
	case <-r.follower.caughtUp:
	default:
		select {
		case <-r.follower.caughtUp:
		case <-time.After(barrierWait):
		}
	}
}

// stopFollowing ends the follow goroutine (on a single node there is none).
func (r *Registry) stopFollowing() {
	if r.follower == nil {
		return
	}
	close(r.follower.stop)
	<-r.follower.done
}

// catchUp is what a lookup that missed calls: in a cluster it waits until
// this node applied every definition committed before, follows keys, and
// reports true (the caller looks again); on a single node it reports
// false. No lock may be held.
func (r *Registry) catchUp(keys ...string) bool {
	if r.follower == nil || r.closed.Load() {
		return false
	}
	if _, err := r.follower.awaitBarrier(barrierWait); err != nil {
		r.logger.Warn("mq: cannot reach the cluster's metadata; answering from this node's definitions", "err", err)
		return false
	}
	for _, key := range keys {
		r.followDefinition(key)
	}
	return true
}

// catchUpAll is catchUp for a lookup that cannot name the keys it needs
// (a binding found by its properties key, a route that reached no
// queue): it waits, wait at most, until this node applied every
// definition committed before the call and its follow goroutine
// followed them all. No lock may be held.
func (r *Registry) catchUpAll(wait time.Duration) bool {
	if r.follower == nil || r.closed.Load() {
		return false
	}
	start := time.Now()
	c, err := r.follower.awaitBarrier(wait)
	if err == nil {
		select {
		case <-c.followed:
		case <-r.follower.stop:
			err = ErrClosed
		case <-time.After(wait - time.Since(start)):
			err = errors.New("mq: this node's definition follower is behind")
		}
	}
	if err != nil {
		r.logger.Warn("mq: cannot catch up with the cluster's metadata; answering from this node's definitions", "err", err)
		return false
	}
	return true
}

// CatchUp is catchUpAll for the management API: a lookup of one binding
// there calls it first, so that it answers as of every definition
// committed before the request, on any node. It reports false on a
// single node, where there is nothing to catch up with.
func (r *Registry) CatchUp() bool { return r.catchUpAll(barrierWait) }

// CatchUpWithin is CatchUp for a caller bound by a deadline of its own
// (an AMQP handshake's): it waits wait at most, rather than barrierWait.
func (r *Registry) CatchUpWithin(wait time.Duration) bool { return r.catchUpAll(wait) }

// followDefinition brings the registry in line with key's live value.
func (r *Registry) followDefinition(key string) {
	var err error
	switch {
	case strings.HasPrefix(key, vhostKeyPrefix):
		r.followVHost(key)
	case strings.HasPrefix(key, exchangeKeyPrefix):
		err = r.followInVHost(key, exchangeKeyPrefix, (*VHost).followExchangeLocked)
	case strings.HasPrefix(key, queueKeyPrefix):
		err = r.followInVHost(key, queueKeyPrefix, (*VHost).followQueueLocked)
	case strings.HasPrefix(key, bindingKeyPrefix):
		err = r.followInVHost(key, bindingKeyPrefix, (*VHost).followBindingLocked)
	case strings.HasPrefix(key, policyKeyPrefix):
		err = r.followInVHost(key, policyKeyPrefix, (*VHost).followPolicyLocked)
	}
	if err != nil {
		r.logger.Error("mq: applying a definition from the cluster failed", "key", key, "err", err)
	}
}

// followLocked brings a vhost in line with the live value of one of its
// definitions' keys, with the vhost's defMu held; a deletion's cleanup
// that must run without it goes to cleanup.
type followLocked func(v *VHost, key string, value []byte, live bool, cleanup *deletions) error

// followInVHost follows key, a definition of the vhost it names (nothing
// if that vhost is not here), with the vhost's defMu held from before it
// reads the key's live value to after it applied it: a local declare or
// delete changes the record and the vhost's maps together under defMu, so
// the value read is the one the maps stand for. Read before, a local
// delete could fall between the read and the apply, and the follower
// would build the deleted queue (exchange, binding, policy) again, live
// (a durable queue reopening the store the delete cleans up), until the
// delete is followed.
func (r *Registry) followInVHost(key, prefix string, follow followLocked) error {
	v := r.vhostOf(key, prefix)
	if v == nil {
		return nil
	}
	cleanup := deletions{followed: true}
	v.defMu.Lock()
	value, live := r.cfg.Cluster.Get(key)
	err := follow(v, key, value, live, &cleanup)
	v.defMu.Unlock()
	cleanup.run(r)
	return err
}

// keyNames returns the unescaped names a definition key holds after its
// prefix ("vhost/name" for most kinds; a binding's has more parts).
func keyNames(key, prefix string) []string {
	parts := strings.Split(strings.TrimPrefix(key, prefix), "/")
	for i, p := range parts {
		if s, err := url.PathUnescape(p); err == nil {
			parts[i] = s
		}
	}
	return parts
}

// vhostOf returns the vhost a definition key names, or nil.
func (r *Registry) vhostOf(key, prefix string) *VHost {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.vhosts[keyNames(key, prefix)[0]]
}

// followVHost follows a vhost's key, with vhostDefMu held from before it
// reads the key's live value to after it applied it, as followInVHost
// does for the definitions in a vhost: read before, a local delete could
// fall between (the follower would add the deleted vhost again, live
// until the delete is followed), or a local add (the follower would
// destroy the vhost just added, deleting its record for good).
func (r *Registry) followVHost(key string) {
	r.vhostDefMu.Lock()
	defer r.vhostDefMu.Unlock()
	_, live := r.cfg.Cluster.Get(key)
	name := keyNames(key, vhostKeyPrefix)[0]
	r.mu.Lock()
	v := r.vhosts[name]
	switch {
	case live && v == nil:
		r.vhosts[name] = newVHost(r, name)
	case !live && v != nil:
		delete(r.vhosts, name)
		r.mu.Unlock()
		if err := v.destroy(); err != nil {
			r.logger.Error("mq: deleting a vhost deleted on another node", "vhost", name, "err", err)
		}
		return
	}
	r.mu.Unlock()
}

// followExchangeLocked is a followLocked.
func (v *VHost) followExchangeLocked(key string, value []byte, live bool, cleanup *deletions) error {
	name := keyNames(key, exchangeKeyPrefix)[1]
	x := v.exchanges[name] // the maps change only under defMu, held here
	if !live {
		if x != nil && x.def.Durable && !x.builtin {
			return v.deleteExchangeLocked(x, cleanup)
		}
		return nil
	}
	if x != nil {
		return nil
	}
	var rec exchangeRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return err
	}
	x, err := exchangeFromRecord(rec)
	if err != nil || x == nil {
		return err
	}
	v.mu.Lock()
	v.applyExchangePolicyLocked(x)
	v.exchanges[name] = x
	v.mu.Unlock()
	return nil
}

// followQueueLocked is a followLocked.
func (v *VHost) followQueueLocked(key string, value []byte, live bool, cleanup *deletions) error {
	name := keyNames(key, queueKeyPrefix)[1]
	var rec queueRecord
	if live {
		if err := json.Unmarshal(value, &rec); err != nil {
			return err
		}
	}
	q := v.queues[name]
	if q != nil && live && q.id == rec.ID && rec.Members != nil {
		v.followMembership(q, rec) // a quorum queue's members may have changed
		return nil
	}
	if q != nil && (!q.recorded() || (live && q.id == rec.ID)) {
		return nil // up to date (or this node's transient queue of that name)
	}
	if q != nil { // deleted, or deleted and declared again
		if err := v.deleteQueueLocked(q, cleanup); err != nil {
			return err
		}
	}
	if !live {
		return nil
	}
	q, _, err := v.queueFromRecord(rec)
	if err != nil || q == nil {
		return err
	}
	v.mu.Lock()
	v.queues[name] = q
	v.mu.Unlock()
	return nil
}

// followBindingLocked is a followLocked (a binding's deletion has no
// cleanup).
func (v *VHost) followBindingLocked(key string, value []byte, live bool, _ *deletions) error {
	if live {
		var rec bindingRecord
		if err := json.Unmarshal(value, &rec); err != nil {
			return err
		}
		v.mu.Lock()
		v.applyBindingRecordLocked(rec)
		v.mu.Unlock()
		return nil
	}
	src := v.exchanges[keyNames(key, bindingKeyPrefix)[1]]
	if src == nil || src.bindings == nil {
		return nil
	}
	for _, b := range src.bindings.Bindings() {
		if rec, durable, _ := v.bindingRecordOf(src, b); durable && bindingKey(v.name, rec) == key {
			v.mu.Lock()
			v.removeBindingLocked(src, b)
			v.mu.Unlock()
			return nil
		}
	}
	return nil
}

// followPolicyLocked is a followLocked (a policy's deletion has no
// cleanup).
func (v *VHost) followPolicyLocked(key string, value []byte, live bool, _ *deletions) error {
	name := keyNames(key, policyKeyPrefix)[1]
	v.polMu.Lock()
	old := v.policies[name]
	if !live {
		delete(v.policies, name)
		v.polMu.Unlock()
		if old != nil {
			v.applyPolicies()
		}
		return nil
	}
	v.polMu.Unlock()
	var rec policyRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return err
	}
	if old != nil && string(mustJSON(old.record())) == string(mustJSON(rec)) {
		return nil // this node set it
	}
	p, err := decodePolicyRecord(rec)
	if err != nil {
		return err
	}
	cp, err := compilePolicy(p)
	if err != nil {
		return err
	}
	v.polMu.Lock()
	v.policies[name] = cp
	v.polMu.Unlock()
	v.applyPolicies()
	return nil
}

// errHomeNodeDown is RabbitMQ's answer for a queue whose node cannot be
// reached (rabbit_amqqueue's "home node ... is down or inaccessible"):
// here, a classic queue of another node that this node cannot reach.
func errHomeNodeDown(q *queue) *Error {
	return amqpwire.Errorf(amqpwire.CodeNotFound, "home node 'wharf@%d' of durable %s is down or inaccessible",
		q.home.Load(), resource("queue", q.name, q.vh.name))
}

// errElsewhere is the answer for a queue served on another node.
func (q *queue) errElsewhere() *Error {
	if q.membership.Load() != nil {
		return errQuorumElsewhere(q)
	}
	return errHomeNodeDown(q)
}

// elsewhere reports whether q is served on another node (a placeholder
// here).
func (q *queue) elsewhere() bool { return q.home.Load() != 0 }

// exchangeFromRecord builds a stored exchange (nil, nil for an unknown
// type: the caller logs and leaves it out).
func exchangeFromRecord(xr exchangeRecord) (*exchange, error) {
	kind, ok := routing.ParseKind(xr.Type)
	if !ok {
		return nil, nil
	}
	args, err := decodeArgs(xr.Args)
	if err != nil {
		return nil, err
	}
	def := ExchangeDef{Name: xr.Name, Type: xr.Type, Durable: true, AutoDelete: xr.AutoDelete, Internal: xr.Internal, Args: args}
	return newExchange(def, kind), nil
}
