package mq

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Quorum queues led elsewhere (issue 14): a client may consume, get and
// publish on any node, as RabbitMQ lets it. The node the client is on
// reaches the queue's leader through calls (quorum_calls.go): its
// consumers are sessions there, whose deliveries it pulls and hands to
// its clients under tags of its own, and whose settlements it sends
// back; publishes are forwarded the same way (remoteForward), from
// members and other nodes alike. The leader's own clients consume and
// get through sessions too, answered in-process, so that no message
// leaves any node before its deliver command is committed.
// When the leader moves, a call fails or names a session the new leader
// does not have: the session starts again there, transparently to the
// client, whose tags of the old session are forgotten (settling them
// does nothing: the new leader returned those messages and delivers
// them again, redelivered, with x-delivery-count incremented).

// remoteQueue is this node's way to a quorum queue of the cluster when
// the queue is served elsewhere, and to a classic queue of another node
// on its home node (classic_remote.go).
type remoteQueue struct {
	q   *queue
	ctx context.Context // ends when the queue is deleted here or the registry closes
	end context.CancelFunc

	mu       sync.Mutex
	leader   int32                  // the node that answered the last call, 0 if none did
	rotation int                    // the member to try next while no leader is known
	tags     map[QueueTag]remoteTag // this node's tags of messages held through sessions
	forward  *remoteForward         // the one batches go to, until it is sent
	last     *remoteForward         // the one made last: the next is sent after it
	sessions map[*proxySession]bool
	closed   bool
	// probing: a call to find the leader is in flight (probeLeader).
	probing atomic.Bool
}

// remoteTag is what one of this node's tags stands for: a message held by
// a session, under the leader's tag.
type remoteTag struct {
	s       *proxySession
	session uint64 // the session's id when it took the message
	tag     QueueTag
}

func (r *Registry) newRemoteQueue(q *queue) *remoteQueue {
	ctx, cancel := context.WithCancel(r.proxies.ctx)
	return &remoteQueue{q: q, ctx: ctx, end: cancel, tags: make(map[QueueTag]remoteTag),
		sessions: make(map[*proxySession]bool)}
}

// reachable reports whether q is a quorum queue of the cluster, which
// this node's clients consume and get from through sessions on its
// leader, even when that is this node (the call is then answered here):
// a session hands a message out only once its deliver command is
// committed (servedSession.take).
func (q *queue) reachable() bool {
	return q.remote != nil && !q.crashed.Load()
}

// forwards reports whether a message published to q here goes to its
// leader: q is a quorum queue served elsewhere (or not yet elected).
func (q *queue) forwards() bool { return q.remote != nil && q.elsewhere() }

// callAttempt bounds one attempt of a call on one node (a pull's is
// longer by pullWait).
const callAttempt = 3 * time.Second

// callRetry is how long a call waits once every member refused it (no
// leader yet).
const callRetry = 100 * time.Millisecond

// call sends req to the queue's leader and returns its answer: it tries
// the leader this node knows of, the one a member names, and the members
// in turn, until one serves the queue or ctx ends. A classic queue's
// leader is its home node, while that is in contact (errHomeUnreachable
// once it is not, before the attempt or right after it failed).
func (rq *remoteQueue) call(ctx context.Context, req *remoteRequest) (*remoteReply, error) {
	if rq.classic() {
		req.VHost, req.Name = rq.q.vh.name, rq.q.name
	}
	var data []byte // req encoded, once a call leaves this node
	var hint int32
	for attempt := 1; ; attempt++ {
		if rq.homeDown() {
			return nil, errHomeUnreachable
		}
		node := rq.target(hint)
		reply, err := rq.send(ctx, node, req, &data)
		switch {
		case err == nil && !reply.NotServed:
			rq.setLeader(node)
			return reply, nil
		case err == nil:
			hint = reply.Leader
		default:
			hint = 0
		}
		if hint == node {
			hint = 0
		}
		rq.setLeader(0)
		if req.Op == opPublish && rq.q.recordGone() {
			return nil, errQueueGone // deleted: its group answers no more (gone.go)
		}
		// No pause for a classic queue whose home node the failure showed
		// out of contact (its connection broke: killed): refused at once.
		if hint == 0 && attempt%max(len(rq.q.members()), 1) == 0 && !rq.homeDown() {
			select {
			case <-ctx.Done():
			case <-time.After(callRetry):
			}
		}
		if ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), err)
		}
	}
}

// target is the node to call next: hint if set, else the leader known,
// else the next member in contact.
func (rq *remoteQueue) target(hint int32) int32 {
	if hint > 0 {
		return hint
	}
	if rq.classic() {
		return rq.q.home.Load()
	}
	if q := rq.q; q.quorum.Load() != nil { // a member follows the group
		switch home := q.home.Load(); {
		case home == 0:
			return q.r.nodeID()
		case home > 0:
			return home
		}
	}
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if rq.leader > 0 {
		return rq.leader
	}
	members := rq.q.members()
	up := rq.q.r.cfg.Cluster.PeerUp
	for range members {
		node := members[rq.rotation%len(members)]
		rq.rotation++
		if up == nil || up(node) {
			return node
		}
	}
	return members[rq.rotation%len(members)]
}

// leader is the node leading a quorum queue's group as this node last
// heard: itself, the leader its replica follows, or (on a node with no
// replica) the one that answered its last call; 0 if none.
func (q *queue) leader() int32 {
	switch home := q.home.Load(); {
	case home == 0:
		return q.r.nodeID()
	case home > 0:
		return home
	case q.remote != nil:
		q.remote.mu.Lock()
		defer q.remote.mu.Unlock()
		return q.remote.leader
	}
	return 0
}

// shownLeader is the leader of q (a quorum queue of the cluster) for what
// this node shows of it, 0 if unknown. A node that holds no replica
// learns the leader only from its calls; if it knows none, or one that
// is no longer a member or in contact, it asks in the background, and
// shows the answer from then on.
func (q *queue) shownLeader(ms *quorumMembership) int32 {
	leader := q.leader()
	if leader > 0 && slices.Contains(ms.Members, leader) && q.r.peerUp(leader) {
		return leader
	}
	if q.remote != nil && q.quorum.Load() == nil {
		q.remote.probeLeader()
	}
	return 0
}

// probeLeader finds the queue's leader with a call that does nothing
// there (once at a time; it ends with the queue here, or the registry).
func (rq *remoteQueue) probeLeader() {
	if !rq.probing.CompareAndSwap(false, true) {
		return
	}
	rq.setLeader(0) // so that the call tries the members
	go func() {
		defer rq.probing.Store(false)
		ctx, cancel := context.WithTimeout(rq.ctx, callAttempt)
		defer cancel()
		rq.call(ctx, &remoteRequest{Op: opLeader, Queue: rq.q.id}) // a failure leaves the leader unknown
	}()
}

func (rq *remoteQueue) setLeader(node int32) {
	rq.mu.Lock()
	rq.leader = node
	rq.mu.Unlock()
}

// send makes one attempt of a call on node: on this node's own replica
// it is answered here, without encoding; else req goes encoded as *data
// (encoded by the first attempt that needs it).
func (rq *remoteQueue) send(ctx context.Context, node int32, req *remoteRequest, data *[]byte) (*remoteReply, error) {
	q := rq.q
	timeout := callAttempt
	if req.Op == opPull {
		timeout += pullWait
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if m := q.quorum.Load(); node == q.r.nodeID() && m != nil {
		return m.serve(actx, req), nil
	}
	if *data == nil {
		b, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		*data = b
	}
	go rq.abandonWhenGone(actx, cancel, node, req.Op == opPublish)
	var out []byte
	var err error
	if rq.classic() {
		out, err = q.r.cfg.Cluster.CallNode(actx, node, *data)
	} else {
		out, err = q.r.cfg.Cluster.Call(actx, quorumGroup(q.id), node, *data)
	}
	if err != nil {
		return nil, err
	}
	var reply remoteReply
	if err := json.Unmarshal(out, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// goneCheck is how often a call in flight checks that its node may still
// answer.
const goneCheck = 50 * time.Millisecond

// abandonWhenGone cancels a call to node, until ctx ends, once node is
// out of contact or, as a member of the group sees it, no longer leads:
// the answer of a killed or deposed leader would not come, and the call
// goes to the new one at once instead of at its timeout. A forward
// (publish) is abandoned too once its queue's definition is gone
// (recordGone): no member answers for a deleted queue.
func (rq *remoteQueue) abandonWhenGone(ctx context.Context, cancel context.CancelFunc, node int32, publish bool) {
	q := rq.q
	tick := time.NewTicker(goneCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if up := q.r.cfg.Cluster.PeerUp; up != nil && !up(node) {
			cancel()
			return
		}
		if home := q.home.Load(); q.quorum.Load() != nil && home != node && home != quorumLeaderUnknown {
			cancel()
			return
		}
		if publish && q.recordGone() {
			cancel()
			return
		}
	}
}

// replyError is the error of a reply that refuses its request.
func replyError(r *remoteReply) error {
	if r.Error == "" {
		return nil
	}
	if r.Code != 0 {
		return &Error{Code: r.Code, Text: r.Error}
	}
	return errors.New(r.Error)
}

// close ends every session of the queue here (it was deleted here, or
// the registry closes) and returns their consumers' Cancelled callbacks.
func (rq *remoteQueue) close() []func() {
	rq.end()
	rq.mu.Lock()
	defer rq.mu.Unlock()
	rq.closed = true
	var cancelled []func()
	for s := range rq.sessions {
		if s.spec.Cancelled != nil {
			cancelled = append(cancelled, s.spec.Cancelled)
		}
	}
	return cancelled
}

// settle settles the tags of tags that stand for messages held through a
// session, and returns the others.
func (rq *remoteQueue) settle(tags []QueueTag, kind settleKind) []QueueTag {
	rq.mu.Lock()
	var local []QueueTag
	var held []remoteTag
	for _, tag := range tags {
		rt, ok := rq.tags[tag]
		if !ok {
			local = append(local, tag)
			continue
		}
		delete(rq.tags, tag)
		held = append(held, rt)
	}
	rq.mu.Unlock()
	var touched []*proxySession
	for _, rt := range held { // without rq.mu: a session takes it after its own
		if rt.s.settled(rt, kind) && !slices.Contains(touched, rt.s) {
			touched = append(touched, rt.s)
		}
	}
	for _, s := range touched {
		s.signal()
	}
	return local
}

// newSessionID is a session's id (or a forward's): random, so that the
// leader never confuses two nodes' sessions nor two of one node's.
func newSessionID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

// consume is basic.consume on a queue served elsewhere: a session on the
// leader, started before consume-ok (so the leader's refusals, such as
// 403 for an exclusive consumer, reach the client), and fed by this
// node's pulls.
func (rq *remoteQueue) consume(spec ConsumeSpec) (*Subscription, error) {
	s := rq.newSession(spec, remoteSpecOf(spec))
	s.paused = true // until Resume, after consume-ok
	if err := s.start(); err != nil {
		rq.forget(s)
		return nil, err
	}
	s.run()
	return &Subscription{q: rq.q, spec: spec, remote: s}, nil
}

// remoteSpecOf is the leader's consumer for a client's basic.consume.
func remoteSpecOf(spec ConsumeSpec) *remoteSpec {
	priority, _ := argInt(spec.Args["x-priority"])
	return &remoteSpec{Tag: spec.Tag, Exclusive: spec.Exclusive, NoAck: spec.NoAck, Priority: priority}
}

// followLeaderLocked makes the consumers of q here, which stops being
// served here, consumers through the leader (RabbitMQ keeps a quorum
// queue's consumers when its leader moves): what they held is the new
// leader's to return. Caller holds q.mu, before markDeletedLocked; the
// returned sessions are run once it is released.
func (rq *remoteQueue) followLeaderLocked() []*proxySession {
	var follow []*proxySession
	for _, sub := range rq.q.consumers {
		s := rq.newSession(sub.spec, remoteSpecOf(sub.spec))
		s.paused = sub.paused
		sub.remote = s
		follow = append(follow, s)
	}
	return follow
}

// get is basic.get on a queue served elsewhere: a message not settled at
// once is held by a session of its own until it is settled.
func (rq *remoteQueue) get(noAck bool) (*Delivery, bool, error) {
	req := &remoteRequest{Op: opGet, Queue: rq.q.id, NoAck: noAck}
	var s *proxySession
	if !noAck {
		s = rq.newSession(ConsumeSpec{}, nil)
		s.cancelled = true // it ends once its message is settled
		req.Session, req.Create = s.id, true
	}
	ctx, cancel := context.WithTimeout(rq.ctx, syncWaitRemote)
	defer cancel()
	reply, err := rq.call(ctx, req)
	if err == nil {
		err = replyError(reply)
	}
	if err != nil || len(reply.Deliveries) == 0 {
		if s != nil {
			rq.forget(s)
		}
		if err != nil {
			return nil, false, errUnreachable(rq.q, err)
		}
		return nil, false, nil
	}
	d, err := decodeRemote(rq.q, reply.Deliveries[0])
	if err != nil {
		return nil, false, errInternal("read a message from the queue's leader", err)
	}
	d.MessageCount = reply.Count
	if s != nil {
		s.mu.Lock()
		s.created = true
		d.Tag = s.holdLocked(reply.Deliveries[0].Tag)
		s.outstanding++
		s.mu.Unlock()
		s.run()
	}
	return d, true, nil
}

// errUnreachable answers a consume or get whose leader (or home node)
// could not be reached.
func errUnreachable(q *queue, err error) error {
	if q.remote.classic() {
		return errHomeNodeDown(q)
	}
	q.r.logger.Warn("mq: a quorum queue's leader cannot be reached", "queue", q.name, "vhost", q.vh.name, "err", err)
	return amqpwire.Errorf(amqpwire.CodeNotFound, "%s is a quorum queue on nodes %s whose leader this node cannot reach",
		resource("queue", q.name, q.vh.name), memberNames(q))
}

// syncWaitRemote bounds how long a call made for a client (a forwarded
// publish's confirm, a consume, a get) waits for the leader.
const syncWaitRemote = 10 * time.Second

// remoteForward is enqueue batches gathered on a node that holds no
// replica of the queue (or a classic queue of another node), forwarded
// to its leader (home node) together, as a confirm's replica.Target: the
// first Sync sends them and waits for the leader's answer (once they are
// committed, or durable); every Sync returns that answer.
type remoteForward struct {
	rq      *remoteQueue
	id      uint64 // the leader takes the batches once (forwards.once)
	batches []byte // guarded by rq.mu until sent
	// after is the forward made before this one (unsent, or in flight,
	// or answered): its messages come first, so this one is sent once it
	// was answered (each forward is awaited on a goroutine of its own,
	// awaitDurable).
	after *remoteForward
	once  sync.Once
	err   error

	// The confirms waiting for the answer (awaitDurable): one goroutine
	// sends the forward and tells them all.
	waitMu   sync.Mutex
	waiters  []func(error)
	sending  bool // the goroutine is started
	answered bool // err is the outcome
}

// forwardBatch adds an enqueue batch to those to forward and returns what
// a confirm of it waits on.
func (rq *remoteQueue) forwardBatch(batch []byte) replica.Target {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if rq.forward == nil || len(rq.forward.batches)+len(batch) > callBytes {
		rq.forward = &remoteForward{rq: rq, id: newSessionID(), after: rq.last}
		rq.last = rq.forward
	}
	rq.forward.batches = append(rq.forward.batches, batch...)
	return rq.forward
}

func (f *remoteForward) Sync() error {
	f.once.Do(func() {
		if f.after != nil {
			f.after.Sync() // its outcome is its own confirms'
			f.after = nil
		}
		rq := f.rq
		rq.mu.Lock()
		if rq.forward == f {
			rq.forward = nil // later batches go together
		}
		batches := f.batches
		f.batches = nil // rq.last may keep f: not its messages
		rq.mu.Unlock()
		ctx, cancel := context.WithTimeout(rq.ctx, syncWaitRemote)
		defer cancel()
		reply, err := rq.call(ctx, &remoteRequest{Op: opPublish, Queue: rq.q.id, Batches: batches, Forward: f.id})
		if err == nil {
			err = replyError(reply)
		}
		if err != nil && !rq.q.gone.Load() && !errors.Is(err, errQueueGone) { // deleted meanwhile: confirmed (gone.go)
			f.err = errors.Join(errors.New("mq: forward to the queue's leader or home node"), err)
		}
	})
	return f.err
}

// decodeRemote makes a delivery of a message a session took (its tag is
// set when it is held here).
func decodeRemote(q *queue, rd remoteDelivery) (*Delivery, error) {
	if rd.message != nil { // answered on this node: not encoded
		return &Delivery{Queue: q.name, Redelivered: rd.Redelivered, Message: rd.message}, nil
	}
	m := &Message{Exchange: rd.Exchange, RoutingKey: rd.RoutingKey, RawProperties: rd.Properties, Body: rd.Body}
	if len(m.RawProperties) > 0 {
		if err := m.Properties.Decode(m.RawProperties); err != nil {
			return nil, err
		}
	}
	return &Delivery{Queue: q.name, Redelivered: rd.Redelivered, Message: m}, nil
}

// proxies is the registry's part in the sessions of queues led
// elsewhere: what ends them at Close, and waits for their goroutines.
type proxies struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	stopped bool
}

// add counts n goroutines about to start, unless stop was called.
func (p *proxies) add(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.wg.Add(n)
	}
	return !p.stopped
}

func newProxies() proxies {
	ctx, cancel := context.WithCancel(context.Background())
	return proxies{ctx: ctx, cancel: cancel}
}

// stop ends every session's goroutines and waits for them.
func (p *proxies) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}
