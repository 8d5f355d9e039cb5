package mq

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/quorumstore"
)

// Calls to a quorum queue's leader (issue 14). A node that does not serve
// a quorum queue reaches it on its leader through calls
// (ClusterConfig.Call, to the owner of the leader's replica): a
// publish on a node that holds no replica, and the consumers and
// basic.gets of clients connected anywhere (quorum_proxy.go). Every
// member answers calls (quorumReplica.answer); one that does not serve
// the queue says so, naming the leader it knows of, and the caller asks
// that node next.
//
// Consuming is a session on the leader: a consumer of the queue there,
// whose deliveries wait in the session until the calling node pulls
// them (a long poll, which also keeps the session alive), and which the
// calling node settles by the leader's tags. The calling node says how
// many deliveries the session may hold unsettled at most (its limit: the
// client's prefetch), which the leader counts itself, so that calls
// crossing each other never let it hand out more. A session ends when the calling node ends it, when it
// is not heard from for sessionTimeout (its node died or was cut off:
// what it held is returned to the queue, with x-delivery-count
// incremented), or when the leader stops serving the queue (the new
// leader returns what it held, the same way). A call naming a session the
// leader does not have is answered Gone: the caller starts a new one,
// and forgets the tags of the old. Pulls are numbered, so that one
// repeated after its answer was lost gets the same answer; a session
// answers a pull with deliveries only once their deliver commands are
// committed. A forwarded publish carries an id the leader takes it once
// by (quorum_forwards.go).
//
// A classic queue of another node is reached the same way, with its home
// node as a leader that never moves (classic_remote.go): served answers
// the calls on a quorum queue's members and on a classic queue's home
// node alike.

// remoteOp is what a call asks of the leader.
type remoteOp string

const (
	opPublish remoteOp = "publish" // enqueue Batches (one message each), answer once committed
	opPull    remoteOp = "pull"    // settle, take Limit, answer with the session's deliveries
	opSettle  remoteOp = "settle"  // settle, take Limit
	opGet     remoteOp = "get"     // basic.get, held by Session unless NoAck
	opEnd     remoteOp = "end"     // end Session: what it holds goes back to the queue
	opLeader  remoteOp = "leader"  // nothing: whoever answers serves the queue (quorum_members.go)
	opPurge   remoteOp = "purge"   // queue.purge, answered with the count purged (classic queues)
	opInfo    remoteOp = "info"    // a declare's message and consumer counts (classic queues)
	opDelete  remoteOp = "delete"  // queue.delete, answered with the count deleted (classic queues)
	opStats   remoteOp = "stats"   // the figures of the Served queues the node serves (a node call: queue_stats_cluster.go)
)

// remoteRequest is one call's request.
type remoteRequest struct {
	Op remoteOp `json:"op"`
	// Queue is the queue's id: a call for a queue deleted and declared
	// again is not answered by the new one.
	Queue string `json:"queue"`
	// VHost and Name find a classic queue on its home node (calls to a
	// quorum queue go to its group's replica).
	VHost   string `json:"vhost,omitempty"`
	Name    string `json:"name,omitempty"`
	Batches []byte `json:"batches,omitempty"`
	// Forward identifies a publish's Batches: a repeat is not enqueued
	// again (quorum_forwards.go).
	Forward uint64 `json:"forward,omitempty"`
	Session uint64 `json:"session,omitempty"`
	// Pull numbers a session's pulls from 1: a pull repeated because its
	// answer was lost gets that answer again (servedSession.pull).
	Pull    uint64      `json:"pull,omitempty"`
	Create  bool        `json:"create,omitempty"` // start Session if the leader has no such one
	Limit   int         `json:"limit,omitempty"`
	NoAck   bool        `json:"no_ack,omitempty"`
	Spec    *remoteSpec `json:"spec,omitempty"` // the consumer, when Create
	Ack     []QueueTag  `json:"ack,omitempty"`
	Discard []QueueTag  `json:"discard,omitempty"`
	Requeue []QueueTag  `json:"requeue,omitempty"`
	// IfUnused and IfEmpty are opDelete's conditions.
	IfUnused bool `json:"if_unused,omitempty"`
	IfEmpty  bool `json:"if_empty,omitempty"`
	// Served are the queues opStats asks the figures of.
	Served []servedRef `json:"served,omitempty"`
	// Removed is the node opAwaitRemoval names.
	Removed int32 `json:"removed,omitempty"`
	// Replies are opReplies' (replyto_cluster.go).
	Replies []forwardedReply `json:"replies,omitempty"`
}

// remoteSpec is what the leader's consumer of a session takes from the
// client's basic.consume.
type remoteSpec struct {
	Tag       string `json:"tag"`
	Exclusive bool   `json:"exclusive,omitempty"`
	NoAck     bool   `json:"no_ack,omitempty"`
	Priority  int64  `json:"priority,omitempty"`
}

// remoteReply is one call's answer.
type remoteReply struct {
	// NotServed: the queue is not served on the called node; Leader is
	// the node that leads its group as far as it knows (0: none known).
	NotServed bool  `json:"not_served,omitempty"`
	Leader    int32 `json:"leader,omitempty"`
	// Gone: the leader has no session of that id.
	Gone bool `json:"gone,omitempty"`
	// Error refuses the request for good (the caller does not try
	// another node): a publish not taken, a consume refused.
	Error      string           `json:"error,omitempty"`
	Code       uint16           `json:"code,omitempty"` // Error's AMQP reply code, if it has one
	Deliveries []remoteDelivery `json:"deliveries,omitempty"`
	// TimedOut names a delivery of the session left unacknowledged past
	// the consumer timeout (TimeoutNotifier), Timeout that timeout.
	TimedOut QueueTag      `json:"timed_out,omitempty"`
	Timeout  time.Duration `json:"timeout,omitempty"`
	Count    int           `json:"count,omitempty"` // basic.get-ok's message-count; purged, ready or deleted (opPurge, opInfo, opDelete)
	// Consumers is the queue's consumer count (opInfo).
	Consumers int `json:"consumers,omitempty"`
	// Figures answer opStats, one per queue asked, in order: nil for one
	// the node does not serve.
	Figures []*servedFigures `json:"figures,omitempty"`
}

// remoteDelivery is one message handed to a session.
type remoteDelivery struct {
	Tag         QueueTag `json:"tag"` // the leader's
	Redelivered bool     `json:"redelivered,omitempty"`
	Exchange    string   `json:"exchange"`
	RoutingKey  string   `json:"routing_key"`
	Properties  []byte   `json:"properties,omitempty"`
	Body        []byte   `json:"body"`
	// message is the message itself, for a call answered on this node
	// (the leader's own clients): decodeRemote takes it as it is.
	message *Message
}

// sessionTimeout is how long a leader keeps a session its calling node
// is not heard from (it pulls every pullWait at least).
const sessionTimeout = 10 * time.Second

// pullWait is how long a pull waits on the leader for a delivery.
const pullWait = time.Second

// served answers the calls other nodes make to a queue of this node: a
// quorum queue's member (quorumReplica), which serves it while it leads,
// or a classic queue's home node (classic_remote.go).
type served struct {
	q *queue
	// sessions are other nodes' consumers of the queue while it is
	// served here.
	sessions sessions
	// forwards are the forwarded publishes taken lately
	// (quorum_forwards.go).
	forwards forwards
	// take publishes into the queue the messages of a forward (opPublish),
	// but those of them the queue's log held at the takeover (logged), and
	// returns once they are durable: committed, for a quorum queue.
	take func(batches []byte, id uint64, logged quorumstore.Forward) error
}

// answer answers a call another node made to this replica (decoded;
// raft.CallHandler).
func (m *served) answer(ctx context.Context, _ uint64, data []byte) ([]byte, error) {
	var req remoteRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	return json.Marshal(m.serve(ctx, &req))
}

// serve answers req, on any member of a quorum queue, or a classic
// queue's home node.
func (m *served) serve(ctx context.Context, req *remoteRequest) *remoteReply {
	q := m.q
	if req.Op == opPublish && (req.Queue != q.id || q.gone.Load()) {
		return &remoteReply{} // deleted (and maybe declared again): dropped, confirmed (gone.go)
	}
	if req.Queue != q.id {
		return errorReply(errNotFound("queue", q.name, q.vh.name)) // deleted, and declared again
	}
	if q.crashed.Load() && q.membership.Load() == nil {
		return errorReply(errCrashed(q.name, q.vh.name)) // a classic queue: no other node serves it
	}
	if leader := q.home.Load(); leader != 0 || q.crashed.Load() {
		return &remoteReply{NotServed: true, Leader: max(leader, 0)}
	}
	switch req.Op {
	case opLeader:
		return &remoteReply{}
	case opPublish:
		err := m.forwards.once(ctx, req.Forward, func(logged quorumstore.Forward) error {
			return m.take(req.Batches, req.Forward, logged)
		})
		if err != nil && !q.gone.Load() { // deleted meanwhile: confirmed (gone.go)
			return &remoteReply{Error: err.Error()}
		}
		return &remoteReply{}
	case opPurge:
		n, err := q.purge()
		if err != nil {
			return errorReply(err)
		}
		return &remoteReply{Count: n}
	case opInfo:
		info := q.info()
		q.touch()
		return &remoteReply{Count: info.Messages, Consumers: info.Consumers}
	case opDelete:
		n, err := q.vh.DeleteQueue(q.name, req.IfUnused, req.IfEmpty, 0)
		if err != nil {
			return errorReply(err)
		}
		return &remoteReply{Count: n}
	case opEnd:
		if s := m.sessions.take(req.Session); s != nil {
			s.settle(req)
			s.end(true)
		}
		return &remoteReply{}
	case opGet:
		if req.NoAck {
			return getReply(q, true)
		}
	}
	s, reply := m.session(req)
	if reply != nil {
		return reply
	}
	s.settle(req)
	switch req.Op {
	case opGet:
		reply := s.get()
		if len(reply.Deliveries) == 0 && m.sessions.take(s.id) != nil {
			s.end(false) // nothing to hold
		}
		return reply
	case opPull:
		return s.pull(ctx, req.Pull)
	}
	return &remoteReply{}
}

// session returns req's session, started if req asks for it, or the
// answer for a session the leader does not have.
func (m *served) session(req *remoteRequest) (*servedSession, *remoteReply) {
	if s := m.sessions.touch(req.Session); s != nil {
		return s, nil
	}
	if !req.Create {
		return nil, &remoteReply{Gone: true}
	}
	s := &servedSession{id: req.Session, q: m.q, held: make(map[QueueTag]bool), wake: make(chan struct{}, 1)}
	if req.Spec != nil {
		s.noAck = req.Spec.NoAck
		sub, err := m.q.subscribe(ConsumeSpec{Tag: req.Spec.Tag, Exclusive: req.Spec.Exclusive, NoAck: req.Spec.NoAck,
			Args: priorityArgs(req.Spec.Priority), Consumer: s})
		if err != nil {
			return nil, errorReply(err)
		}
		s.sub = sub
	}
	if other := m.sessions.add(s, m.expire); other != nil { // a retried create
		if s.sub != nil {
			s.sub.Cancel()
		}
		return other, nil
	}
	return s, nil
}

// expire ends a session its node no longer calls.
func (m *served) expire(id uint64) {
	if s := m.sessions.take(id); s != nil {
		m.q.r.logger.Info("mq: a consumer on another node went silent; its messages are returned",
			"queue", m.q.name, "vhost", m.q.vh.name)
		s.end(true)
	}
}

// priorityArgs are the consume arguments of a consumer priority.
func priorityArgs(p int64) amqpwire.Table {
	if p == 0 {
		return nil
	}
	return amqpwire.Table{"x-priority": p}
}

// errorReply answers a call refused with err.
func errorReply(err error) *remoteReply {
	r := &remoteReply{Error: err.Error()}
	if e, ok := errors.AsType[*Error](err); ok {
		r.Code, r.Error = e.Code, e.Text
	}
	return r
}

// sessions are the sessions of a quorum queue on its leader, each with
// the timer that expires it.
type sessions struct {
	mu sync.Mutex
	m  map[uint64]*servedSession
}

// add adds s unless a session of its id exists, which it returns.
func (ss *sessions) add(s *servedSession, expire func(uint64)) *servedSession {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if other := ss.m[s.id]; other != nil {
		other.expiry.Reset(sessionTimeout)
		return other
	}
	if ss.m == nil {
		ss.m = make(map[uint64]*servedSession)
	}
	id := s.id
	s.expiry = time.AfterFunc(sessionTimeout, func() { expire(id) })
	ss.m[id] = s
	return nil
}

// touch returns session id, its expiry put off, or nil.
func (ss *sessions) touch(id uint64) *servedSession {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[id]
	if s != nil {
		s.expiry.Reset(sessionTimeout)
	}
	return s
}

// take removes session id and returns it, or nil.
func (ss *sessions) take(id uint64) *servedSession {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[id]
	if s != nil {
		s.expiry.Stop()
		delete(ss.m, id)
	}
	return s
}

// takeAll removes every session and returns them.
func (ss *sessions) takeAll() []*servedSession {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	all := make([]*servedSession, 0, len(ss.m))
	for id, s := range ss.m {
		s.expiry.Stop()
		delete(ss.m, id)
		all = append(all, s)
	}
	return all
}

// servedSession is, on the leader, one session of a node that consumes
// or gets from the queue for its clients: a Consumer of the queue whose
// deliveries wait for the next pull.
type servedSession struct {
	id     uint64
	q      *queue
	sub    *Subscription // nil for basic.get only
	noAck  bool          // its consumer's deliveries are settled when handed over
	expiry *time.Timer

	mu       sync.Mutex
	limit    int      // the most deliveries it may hold (countLocked)
	timedOut QueueTag // a delivery past the consumer timeout, not told yet
	timeout  time.Duration
	buffered []*Delivery       // taken, not pulled yet
	held     map[QueueTag]bool // taken and not settled
	ended    bool
	wake     chan struct{} // one token: something was buffered, or the session ended

	// pullMu serializes pulls; lastPull is the number of the last one
	// answered and lastAnswer its answer, sent again if it is repeated.
	pullMu     sync.Mutex
	lastPull   uint64
	lastAnswer *remoteReply
}

// countLocked is what the session holds against its limit: the
// deliveries not settled, or, for a consumer without acks, not pulled.
func (s *servedSession) countLocked() int {
	if s.noAck {
		return len(s.buffered)
	}
	return len(s.held)
}

// TryDeliver buffers d for the next pull while the session is below its
// limit. It runs under the queue's lock.
func (s *servedSession) TryDeliver(d *Delivery) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.countLocked() >= s.limit {
		return false
	}
	s.buffered = append(s.buffered, d)
	if !s.noAck {
		s.held[d.Tag] = true
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

// DeliveryTimedOut notes a delivery past the consumer timeout for the
// next pull to tell the calling node, whose client's channel closes.
func (s *servedSession) DeliveryTimedOut(tag QueueTag, timeout time.Duration) {
	s.mu.Lock()
	if s.held[tag] {
		s.timedOut, s.timeout = tag, timeout
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// settle settles what req settles (the tags this session holds), and
// takes its limit.
func (s *servedSession) settle(req *remoteRequest) {
	s.mu.Lock()
	owned := func(tags []QueueTag) []QueueTag {
		out := tags[:0]
		for _, t := range tags {
			if s.held[t] {
				delete(s.held, t)
				out = append(out, t)
			}
		}
		return out
	}
	ack, discard, requeue := owned(req.Ack), owned(req.Discard), owned(req.Requeue)
	s.limit = req.Limit
	resume := s.sub != nil && !s.ended && s.countLocked() < s.limit
	s.mu.Unlock()
	v := s.q.vh
	if len(ack) > 0 {
		v.Ack(s.q.name, ack...)
	}
	if len(discard) > 0 {
		v.Discard(s.q.name, discard...)
	}
	if len(requeue) > 0 {
		v.Requeue(s.q.name, requeue...)
	}
	if resume {
		s.sub.Resume()
	}
}

// callBytes bounds the messages' bytes of one call or answer (it stays
// far below the cluster transport's frame limit); a single message may
// exceed it.
const callBytes = 4 << 20

// pull answers pull number n of the calling node. Pulls are idempotent:
// the calling node repeats a pull whose answer it did not get, and the
// repeat gets the same answer, so deliveries handed out in a lost answer
// still reach the client instead of sitting counted against its prefetch
// (with the session kept alive by the repeats). An older pull arriving
// late gets nothing.
func (s *servedSession) pull(ctx context.Context, n uint64) *remoteReply {
	s.pullMu.Lock()
	defer s.pullMu.Unlock()
	switch {
	case n == s.lastPull && s.lastAnswer != nil:
		return s.lastAnswer
	case n < s.lastPull:
		return &remoteReply{}
	}
	reply := s.take(ctx)
	s.lastPull, s.lastAnswer = n, reply
	return reply
}

// take answers with what the session buffered (up to callBytes) whose
// deliver commands are committed, waiting for the first one's commit and
// up to pullWait for a first delivery. The others stay buffered for the
// next pull, their commit under way: a pull does not wait for the
// deliveries made while it waited, and the calling node's next pull
// overlaps their commit.
func (s *servedSession) take(ctx context.Context) *remoteReply {
	timer := time.NewTimer(pullWait)
	defer timer.Stop()
	for {
		ds, ended, timedOut, timeout := s.takeBuffered()
		if ended {
			return &remoteReply{Gone: true}
		}
		n, ok := s.committed(ds)
		if !ok {
			select { // they wait in buffered for the next pull
			case <-timer.C:
			case <-ctx.Done():
			}
			return &remoteReply{TimedOut: timedOut, Timeout: timeout}
		}
		if ds = ds[:n]; len(ds) > 0 || timedOut != 0 {
			r := deliveriesReply(ds)
			r.TimedOut, r.Timeout = timedOut, timeout
			return r
		}
		select {
		case <-s.wake:
		case <-timer.C:
			return &remoteReply{}
		case <-ctx.Done():
			return &remoteReply{}
		}
	}
}

// takeBuffered takes the deliveries buffered, up to callBytes, and the
// delivery past the consumer timeout not told yet. It holds the queue's
// lock too, so that each delivery taken has its handout: a delivery is
// buffered (TryDeliver) and handed over (handOverLocked) in one hold of
// that lock.
func (s *servedSession) takeBuffered() (ds []*Delivery, ended bool, timedOut QueueTag, timeout time.Duration) {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	n, size := 0, 0
	for n < len(s.buffered) && (n == 0 || size+len(s.buffered[n].Message.Body) <= callBytes) {
		size += len(s.buffered[n].Message.Body)
		n++
	}
	ds = s.buffered[:n:n]
	s.buffered = s.buffered[n:]
	timedOut, timeout = s.timedOut, s.timeout
	s.timedOut = 0
	return ds, s.ended, timedOut, timeout
}

// committed waits until the deliver command of ds[0], just taken from
// buffered, is committed (a quorum queue's), and returns how many of ds,
// from the first, are committed; the others go back to the front of
// buffered. If the first is not committed, all go back (the queue is
// losing its quorum here: it stops serving, or the next pull tries
// again) and it reports false.
func (s *servedSession) committed(ds []*Delivery) (int, bool) {
	if len(ds) == 0 {
		return 0, true
	}
	n := 0
	err := ds[0].handout.Sync()
	if err == nil {
		n = 1
		for n < len(ds) && ds[n].handout.Passed() {
			n++
		}
		if n > 1 && ds[n-1].handout.Sync() != nil { // passed, but not this term's records
			n = 1
		}
	}
	if n < len(ds) {
		s.mu.Lock()
		if !s.ended {
			s.buffered = append(ds[n:], s.buffered...)
		}
		s.mu.Unlock()
	}
	if err != nil {
		s.q.r.logger.Warn("mq: deliveries of a quorum queue wait: their deliver commands are not committed",
			"queue", s.q.name, "vhost", s.q.vh.name, "err", err)
		return 0, false
	}
	return n, true
}

// get is basic.get for the calling node, the message held by the
// session.
func (s *servedSession) get() *remoteReply {
	reply := getReply(s.q, false)
	if len(reply.Deliveries) > 0 {
		s.mu.Lock()
		s.held[reply.Deliveries[0].Tag] = true
		s.mu.Unlock()
	}
	return reply
}

// getReply is basic.get on the leader (or home node) for a client of any
// node, answered once the message may leave the node (its handout, a
// quorum queue's). If it may not, the message goes back to the queue (it
// was not handed out), and the get fails. A quorum queue's message got
// without ack is taken as with ack, and settled only once its deliver
// command is committed: settled at once, it would be lost with a get
// that fails, once that settle commits. (Should the leader change before
// the settle commits, the next one returns it, redelivered, as one a
// consumer held.)
func getReply(q *queue, noAck bool) *remoteReply {
	settleLater := noAck && q.quorum.Load() != nil
	d, ok, err := q.get(noAck && !settleLater)
	switch {
	case err != nil:
		return errorReply(err)
	case !ok:
		return &remoteReply{}
	}
	if err := d.handout.Sync(); err != nil {
		if !noAck || settleLater {
			q.vh.Requeue(q.name, d.Tag)
		}
		return errorReply(errInternal("commit a delivery of a quorum queue", err))
	}
	if settleLater {
		q.vh.Ack(q.name, d.Tag)
		q.stats.gotWithoutAck()
	}
	r := deliveriesReply([]*Delivery{d})
	r.Count = d.MessageCount
	return r
}

// end ends the session: its consumer is cancelled, and with requeue what
// it holds goes back to the queue (not when the queue is no longer
// served here: the new leader returns it).
func (s *servedSession) end(requeue bool) {
	s.mu.Lock()
	s.ended = true
	tags := make([]QueueTag, 0, len(s.held))
	for t := range s.held {
		tags = append(tags, t)
	}
	s.held, s.buffered = map[QueueTag]bool{}, nil
	select {
	case s.wake <- struct{}{}:
	default:
	}
	s.mu.Unlock()
	if s.sub != nil {
		s.sub.Cancel()
	}
	if requeue && len(tags) > 0 {
		s.q.vh.Requeue(s.q.name, tags...)
	}
}

// deliveriesReply encodes deliveries for the calling node.
func deliveriesReply(ds []*Delivery) *remoteReply {
	r := &remoteReply{Deliveries: make([]remoteDelivery, len(ds))}
	for i, d := range ds {
		m := d.Message
		props, _ := encodeProperties(m) // it was encoded when published
		r.Deliveries[i] = remoteDelivery{Tag: d.Tag, Redelivered: d.Redelivered, Exchange: m.Exchange,
			RoutingKey: m.RoutingKey, Properties: props, Body: m.Body, message: m}
	}
	return r
}
