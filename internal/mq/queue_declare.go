package mq

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wharf-mq/wharf/internal/queuestore"
)

// DeclareQueue is queue.declare.
//
// Passive: 404 if the queue does not exist, 405 if it is another
// connection's exclusive queue. Otherwise an empty name gets a server name,
// a new name starting with "amq." is 403, and an existing queue must be
// declared by its owner with the same exclusivity (405) and be equivalent
// in durable, auto-delete and the arguments RabbitMQ compares for its type
// (406). A new queue's arguments are checked as RabbitMQ 4.1 checks them
// (406 with its texts, see queue_args.go); a quorum queue
// (x-queue-type quorum) must be durable, not exclusive, not auto-delete and
// not server-named (406). A name that is not valid UTF-8 is 501 (see
// checkUTF8). Any declare counts as a use for x-expires.
func (v *VHost) DeclareQueue(d QueueDef, passive bool) (QueueInfo, error) {
	if err := checkUTF8(d.Name); err != nil {
		return QueueInfo{}, err
	}
	if IsReplyTo(d.Name) {
		return v.declareReply(d.Name) // passive or not: direct reply-to's names are no queues
	}
	if passive {
		q, err := v.accessQueue(d.Name, d.Owner)
		if q != nil && q.elsewhere() {
			err = nil // it exists, on its own node
		}
		if err != nil {
			return QueueInfo{}, err
		}
		return q.declared()
	}
	q, created, err := v.declareQueue(d)
	switch {
	case err != nil:
		return QueueInfo{}, err
	case q.stream != nil && created:
		return q.info(), nil
	}
	q.awaitPlaced() // a quorum queue another node's declare created just now too
	if !created {
		return q.declared()
	}
	return QueueInfo{Name: q.name}, nil
}

// declareQueue is a declare that is not passive, under defMu: it returns
// the queue and whether this declare created it; else it checked d as a
// redeclaration of it. What it answers with (the counts, asked of another
// node for a queue served there; a new quorum queue's placement) is
// waited for without defMu.
func (v *VHost) declareQueue(d QueueDef) (*queue, bool, error) {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if v.isDeleted() {
		return nil, false, errNoVHost(v.name)
	}
	if q := v.queues[d.Name]; q != nil && d.Name != "" {
		return q, false, v.redeclared(q, d)
	}
	if kind := queueTypeOf(d.Args); kind != classicQueue && d.Name == "" {
		return nil, false, errPrecondition("Cannot declare a server-named queue for type %s", kind.module())
	}
	if d.Name == "" {
		d.Name = serverQueueName()
	} else if strings.HasPrefix(d.Name, "amq.") {
		return nil, false, errAccessRefused("queue name '%s' contains reserved prefix 'amq.*'", d.Name)
	}
	if err := checkQueueArgs(d.Name, v.name, d.Args); err != nil {
		return nil, false, err
	}
	switch queueTypeOf(d.Args) {
	case quorumQueue:
		if err := checkQuorumProperties(d, v.name); err != nil {
			return nil, false, err
		}
	case streamQueue:
		if err := checkStreamProperties(d, v.name); err != nil {
			return nil, false, err
		}
		q, created, err := v.createStreamQueue(d)
		if err == nil && !created {
			err = v.redeclared(q, d) // another node's declare of the name landed first
		}
		return q, created, err
	}
	d.Durable = d.Durable && !d.Exclusive
	q, created, err := v.createQueue(d)
	if err == nil && !created {
		err = v.redeclared(q, d) // another node's declare of the name landed first
	}
	return q, created, err
}

// redeclared checks d, a declare of the existing queue q. Caller holds
// defMu.
func (v *VHost) redeclared(q *queue, d QueueDef) error {
	if q.crashed.Load() {
		return errCrashed(d.Name, v.name)
	}
	d.Durable = d.Durable && !d.Exclusive
	return v.queueEquivalent(q, d)
}

// queueEquivalent checks a redeclaration as RabbitMQ's
// rabbit_amqqueue:assert_equivalence does (strict exclusive-owner check).
func (v *VHost) queueEquivalent(q *queue, d QueueDef) error {
	var owner, declaredOwner ConnID
	if q.def.Exclusive {
		owner = q.def.Owner + 1 // +1: any connection, even 0, differs from "none"
	}
	if d.Exclusive {
		declaredOwner = d.Owner + 1
	}
	if owner != declaredOwner {
		return errLocked(q.name, v.name)
	}
	fail := func(arg string, received, current any) error {
		return inequivalent(arg, "queue", q.name, v.name, quoted(received), quoted(current))
	}
	switch {
	case q.def.Durable != d.Durable:
		return fail("durable", d.Durable, q.def.Durable)
	case q.def.AutoDelete != d.AutoDelete:
		return fail("auto_delete", d.AutoDelete, q.def.AutoDelete)
	}
	return argsEquivalent("queue", q.name, v.name, q.def.Args, d.Args, q.opts.kind.args())
}

// checkQuorumProperties refuses what a quorum queue cannot be, with
// RabbitMQ's texts (rabbit_queue_type_util).
func checkQuorumProperties(d QueueDef, vhost string) error {
	q := resource("queue", d.Name, vhost)
	switch {
	case d.AutoDelete:
		return errPrecondition("invalid property 'auto-delete' for %s", q)
	case d.Exclusive:
		return errPrecondition("invalid property 'exclusive-owner' for %s", q)
	case !d.Durable:
		return errPrecondition("invalid property 'non-durable' for %s", q)
	}
	return nil
}

// touch records a use of the queue for x-expires.
func (q *queue) touch() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.deleted {
		q.touchLocked()
	}
}

// serverQueueName returns "amq.gen-" and 16 random bytes in base64url, as
// RabbitMQ names server-named queues.
func serverQueueName() string {
	var b [16]byte
	rand.Read(b[:])
	return "amq.gen-" + base64.RawURLEncoding.EncodeToString(b[:])
}

func newStoreID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// createQueue makes a new queue. A durable one's definition is stored
// first (durable when this returns); its logs are created with its first
// logged message (see queuestore.Store), so declaring touches no queue
// file. In a cluster the name may have been defined by another node
// meanwhile (createDefinition): then nothing is created, and createQueue
// returns that queue, created false.
// Caller holds defMu.
func (v *VHost) createQueue(d QueueDef) (q *queue, created bool, err error) {
	if v.r.closed.Load() {
		return nil, false, ErrClosed
	}
	var id string
	var rec queueRecord
	if d.Exclusive && v.r.recordsExclusive() { // reached from every node (exclusive_cluster.go)
		id = exclusiveIDPrefix + newStoreID()
		rec, err := v.exclusiveRecord(d, id)
		var live, value []byte
		if err == nil {
			value = mustJSON(rec)
			live, err = v.r.createDefinition(queueKey(v.name, d.Name), value)
		}
		if err != nil {
			return nil, false, errInternal("store queue", err)
		}
		if !bytes.Equal(live, value) { // another node's of that name
			q, err := v.existingQueue(live)
			return q, false, err
		}
	}
	if d.Durable {
		id = newStoreID()
		args, err := encodeArgs(d.Args)
		if err == nil {
			rec = queueRecord{VHost: v.name, Name: d.Name, ID: id, Node: v.r.nodeID(), AutoDelete: d.AutoDelete, Args: args}
			if v.r.cfg.Cluster != nil && queueTypeOf(d.Args) == quorumQueue {
				rec.Node, rec.Members, rec.Group = 0, v.r.quorumMembers(d.Args), quorumGroup(id)
			}
			value := mustJSON(rec)
			var live []byte
			if live, err = v.r.createDefinition(queueKey(v.name, d.Name), value); err == nil && !bytes.Equal(live, value) {
				q, err := v.existingQueue(live)
				return q, false, err
			}
		}
		if err != nil {
			return nil, false, errInternal("store queue", err)
		}
	}
	switch {
	case rec.Members != nil:
		q, _ = v.quorumQueue(d, rec) // served once its group elected this node
	case d.Durable:
		q = v.newQueue(d, id)
		q.store = v.r.stores.Create(id, q.storeOwner())
	default:
		q = v.newQueue(d, id)
	}
	q.arm()
	v.mu.Lock()
	v.queues[d.Name] = q
	v.mu.Unlock()
	return q, true, nil
}

// existingQueue builds the queue another node's definition value names,
// as following it would (followQueue), for a declare whose own
// definition was not created. Caller holds defMu.
func (v *VHost) existingQueue(value []byte) (*queue, error) {
	var rec queueRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return nil, errInternal("read queue", err)
	}
	q, _, err := v.queueFromRecord(rec)
	switch {
	case err != nil:
		return nil, errInternal("open queue", err)
	case q == nil:
		return nil, errPrecondition("cannot declare %s: stream queues are not available on this node",
			resource("queue", rec.Name, v.name))
	}
	v.mu.Lock()
	v.queues[rec.Name] = q
	v.mu.Unlock()
	return q, nil
}

// openQueue builds a queue defined before this start; a durable one opens
// its store and recovers its unsettled messages, bodies left on disk until
// needed. Then it arms the queue's timers (x-expires counts from now). A
// queue whose store cannot be opened or read is crashed (crash.go): the
// other queues serve.
func (v *VHost) openQueue(d QueueDef, id string) *queue {
	q := v.newQueue(d, id)
	if d.Durable {
		if err := q.recover(id); err != nil {
			q.crashAtOpen(err)
			return q
		}
	}
	q.arm()
	return q
}

func (v *VHost) newQueue(d QueueDef, id string) *queue {
	args, _ := v.effectiveQueueArgs(d)
	opts := parseQueueOptions(args)
	return &queue{
		r: v.r, vh: v, name: d.Name, def: d, opts: opts, id: id,
		sources: make(map[*exchange]int),
		unacked: make(map[QueueTag]*entry),
		ready:   newReadyQueue(opts.levels),
	}
}

// arm starts the queue's x-expires clock and its message timers.
func (q *queue) arm() {
	q.mu.Lock()
	q.touchLocked()
	q.armHeadsLocked()
	q.mu.Unlock()
}

// recover opens a durable queue's store and puts its unsettled messages on
// the ready list, with their delivery counts. When the queue's priorities,
// x-max-length-bytes or x-message-ttl need each message's priority, size
// or enqueue time, the messages log is read through once; otherwise bodies
// stay on disk until needed, and a message's own expiration is learnt
// when it is read.
func (q *queue) recover(id string) error {
	s, err := q.r.stores.Open(id, q.storeOwner())
	q.store = s // closed on error, but holding the files for DeleteQueue
	if err != nil {
		return err
	}
	if err := q.loadUnsettled(); err != nil {
		s.CloseWithoutMarker()
		return err
	}
	return nil
}

// loadUnsettled puts the unsettled messages q's store recovered (or
// replayed) on the ready list, reading the log through once if the
// queue's options need each message's priority, size or enqueue time.
// Caller holds q.mu, or q is not shared yet.
func (q *queue) loadUnsettled() error {
	s := q.store
	var es []*entry
	s.Unsettled(func(off int64, redelivered bool, returns uint32) {
		es = append(es, &entry{tag: q.r.newTag(), offset: off, redelivered: redelivered,
			returns: returns, expiresAt: expiryUnknown})
	})
	o := &q.opts
	if len(es) > 0 && (o.levels > 1 || o.maxBytes >= 0 || o.messageTTL >= 0) {
		i := 0
		var bad error
		err := s.Scan(es[0].offset, decoding(func(off, ts int64, m *Message) bool {
			for i < len(es) && es[i].offset < off {
				i++
			}
			if i == len(es) || es[i].offset != off {
				return true // settled
			}
			e := es[i]
			e.size = int64(len(m.Body))
			e.level = uint8(o.level(m.Properties.Priority))
			e.expiresAt = q.expiryOf(m, ts)
			return true
		}, &bad))
		if err == nil {
			err = bad
		}
		if err != nil {
			return fmt.Errorf("read queue log: %w", err)
		}
	}
	for _, e := range es {
		q.ready.PushBack(e)
	}
	return nil
}

// storeOwner is what q's store knows of q.
func (q *queue) storeOwner() queuestore.Owner {
	return queuestore.Owner{Lock: &q.mu, Name: q.name, VHost: q.vh.name, Crash: q.crash}
}

// DeleteQueue is queue.delete; it returns the number of ready messages
// deleted. A missing queue is not an error (0, as in RabbitMQ). Another
// connection's exclusive queue is 405; ifUnused with consumers and ifEmpty
// with ready messages are 406. Consumers get their Cancelled callback.
// A classic queue of another node is deleted there (classic_remote.go).
func (v *VHost) DeleteQueue(name string, ifUnused, ifEmpty bool, conn ConnID) (int, error) {
	if q, _ := v.lookupQueue(name); q != nil && q.remote != nil && q.remote.classic() && !q.def.Exclusive { // maybe declared elsewhere just now
		return q.remote.deleteRemote(ifUnused, ifEmpty)
	}
	return v.deleteHere(name, ifUnused, ifEmpty, conn)
}

// deleteHere is DeleteQueue of what this node holds of the queue.
func (v *VHost) deleteHere(name string, ifUnused, ifEmpty bool, conn ConnID) (int, error) {
	v.defMu.Lock()
	var cleanup deletions
	n, err := func() (int, error) {
		q := v.queues[name]
		if q == nil {
			return 0, nil
		}
		if q.def.Exclusive && q.def.Owner != conn {
			return 0, errLocked(name, v.name)
		}
		q.mu.Lock()
		consumers, ready := len(q.consumers), q.ready.Len()
		q.mu.Unlock()
		switch {
		case ifUnused && consumers > 0:
			return 0, errPrecondition("%s in use", resource("queue", name, v.name))
		case ifEmpty && ready > 0:
			return 0, errPrecondition("%s not empty", resource("queue", name, v.name))
		}
		return ready, v.deleteQueueLocked(q, &cleanup)
	}()
	v.defMu.Unlock()
	cleanup.run(v.r)
	return n, err
}

// PurgeQueue is queue.purge: it removes the ready messages (not those
// delivered and unacknowledged) and returns how many.
func (v *VHost) PurgeQueue(name string, conn ConnID) (int, error) {
	q, err := v.accessQueue(name, conn)
	if q != nil && q.remote != nil && q.remote.classic() {
		return q.remote.purgeRemote()
	}
	if err != nil {
		return 0, err
	}
	if q.stream != nil {
		return 0, errStreamNotSupported("queue.purge", name, v.name)
	}
	return q.purge()
}

// purge is queue.purge on a queue served here.
func (q *queue) purge() (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return 0, errNotFound("queue", q.name, q.vh.name)
	}
	return q.purgeLocked(), nil
}

// ConnectionClosed deletes the exclusive queues conn owned.
func (v *VHost) ConnectionClosed(conn ConnID) {
	v.defMu.Lock()
	var cleanup deletions
	for _, q := range v.queues {
		if q.def.Exclusive && q.def.Owner == conn {
			if err := v.deleteQueueLocked(q, &cleanup); err != nil {
				v.r.logger.Error("mq: delete exclusive queue", "queue", q.name, "vhost", v.name, "err", err)
			}
		}
	}
	v.defMu.Unlock()
	cleanup.run(v.r)
}

// autoDelete deletes q if it is an auto-delete queue that had consumers and
// has none now. Called with no lock held, after a consumer went.
func (v *VHost) autoDelete(q *queue) {
	v.defMu.Lock()
	var cleanup deletions
	if v.queues[q.name] == q {
		q.mu.Lock()
		idle := len(q.consumers) == 0
		q.mu.Unlock()
		if idle {
			if err := v.deleteQueueLocked(q, &cleanup); err != nil {
				v.r.logger.Error("mq: auto-delete queue", "queue", q.name, "vhost", v.name, "err", err)
			}
		}
	}
	v.defMu.Unlock()
	cleanup.run(v.r)
}

// deleteQueueLocked removes q, its bindings and definitions, ends it, and
// auto-deletes exchanges left without bindings. The consumers' callbacks and
// the removal of the queue's files are left in cleanup, to run once no lock
// is held. Caller holds defMu.
func (v *VHost) deleteQueueLocked(q *queue, cleanup *deletions) error {
	if v.queues[q.name] != q {
		return nil
	}
	var refs []bindingRef
	for src := range q.sources {
		for _, b := range src.bindings.Bindings() {
			if b.Dest.q == q {
				refs = append(refs, bindingRef{src, b})
			}
		}
	}
	// A deletion this node only follows writes nothing, and another
	// node's exclusive queue's records are its home node's to delete,
	// unless that node was removed (dropExclusiveOf).
	if !cleanup.followed && (!q.foreignExclusive() || cleanup.orphans) {
		for _, ref := range refs {
			if err := v.unstoreBinding(ref.src, ref.b); err != nil {
				return err
			}
		}
		if q.recorded() {
			if err := v.r.defs.Delete(queueKey(v.name, q.name)); err != nil {
				return errInternal("delete queue", err)
			}
		}
	}
	q.gone.Store(true)
	v.mu.Lock()
	var emptied []*exchange
	for _, ref := range refs {
		v.removeBindingLocked(ref.src, ref.b)
		if ref.src.def.AutoDelete && ref.src.bindings.Len() == 0 && !containsPtr(emptied, ref.src) {
			emptied = append(emptied, ref.src)
		}
	}
	delete(v.queues, q.name)
	v.mu.Unlock()

	q.mu.Lock()
	cleanup.cancelled = append(cleanup.cancelled, q.markDeletedLocked()...)
	q.mu.Unlock()
	if q.remote != nil {
		cleanup.cancelled = append(cleanup.cancelled, q.remote.close()...)
	}
	if q.store != nil {
		cleanup.stores = append(cleanup.stores, q.store)
	}
	if q.stream != nil {
		v.r.deleteStream(q.stream)
	}
	for _, x := range emptied {
		if err := v.deleteExchangeLocked(x, cleanup); err != nil {
			return err
		}
	}
	return nil
}

// deletions is what deleting queues leaves to do once no lock is held.
type deletions struct {
	cancelled []func()
	stores    []queueStore
	// followed marks deletions that follow the definitions (cluster.go):
	// the node that made them wrote them, so nothing is written. A
	// write would be wrong, too: the name may be defined again since,
	// and its binding keys (made of names) be the new queue's.
	followed bool
	// orphans marks deletions of a removed node's exclusive queues,
	// whose records this node deletes for it (exclusive_cluster.go).
	orphans bool
}

func (d *deletions) run(r *Registry) {
	for _, s := range d.stores {
		if err := s.Delete(); err != nil {
			r.logger.Error("mq: remove queue files", "dir", s.Dir(), "err", err)
		}
	}
	for _, cb := range d.cancelled {
		cb()
	}
}
