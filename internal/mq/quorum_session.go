package mq

import (
	"context"
	"errors"
	"sync"
	"time"
)

// proxySession is one consumer (or one basic.get's message) of this node
// on a quorum queue served elsewhere: a session on the leader
// (quorum_calls.go), fed by two goroutines. pullLoop pulls deliveries
// and hands them to the consumer under tags of this node; settleLoop
// sends settlements as they come, and ends the session once
// it was cancelled and holds nothing, so that an end never overtakes a
// settlement. Either starts the session again when the leader no longer
// has it.
type proxySession struct {
	rq    *remoteQueue
	spec  ConsumeSpec
	rspec *remoteSpec // the leader's consumer; nil for a get's session
	// window is how many deliveries the session may hold unsettled: the
	// consumer's prefetch, or defaultWindow.
	window int
	wake   chan struct{} // one token: settleLoop has something to send

	// Guarded by mu.
	mu      sync.Mutex
	id      uint64 // the session on the leader; a new one after each restart
	created bool   // the leader has started id
	pulls   uint64 // the pulls of session id answered
	// buffered are deliveries pulled and not handed to the consumer yet
	// (it had no credit).
	buffered            []*pendingDelivery
	outstanding         int // handed over in session id, not settled
	paused, cancelled   bool
	ack, discard, queue []QueueTag // the leader's tags to settle in session id
}

// pendingDelivery is a pulled delivery with the leader's tag.
type pendingDelivery struct {
	d   *Delivery
	tag QueueTag
}

// defaultWindow is how many messages a consumer without a prefetch limit
// holds through a session at most.
const defaultWindow = 256

func (rq *remoteQueue) newSession(spec ConsumeSpec, rspec *remoteSpec) *proxySession {
	s := &proxySession{rq: rq, spec: spec, rspec: rspec, window: defaultWindow, id: newSessionID(),
		wake: make(chan struct{}, 1)}
	for _, p := range []int{spec.Prefetch, spec.GlobalPrefetch} {
		if p > 0 {
			s.window = min(s.window, p)
		}
	}
	rq.mu.Lock()
	rq.sessions[s] = true
	rq.mu.Unlock()
	return s
}

// forget drops a session that ended.
func (rq *remoteQueue) forget(s *proxySession) {
	rq.mu.Lock()
	delete(rq.sessions, s)
	rq.mu.Unlock()
}

// start starts the session on the leader, taking nothing yet.
func (s *proxySession) start() error {
	ctx, cancel := context.WithTimeout(s.rq.ctx, syncWaitRemote)
	defer cancel()
	reply, err := s.rq.call(ctx, &remoteRequest{Op: opSettle, Queue: s.rq.q.id, Session: s.id, Create: true, Spec: s.rspec})
	if err != nil {
		return errUnreachable(s.rq.q, err)
	}
	if err := replyError(reply); err != nil {
		return err
	}
	s.created = true
	return nil
}

// run starts the session's goroutines.
func (s *proxySession) run() {
	p := &s.rq.q.r.proxies
	if !p.add(2) {
		return // the registry closes
	}
	go func() {
		defer p.wg.Done()
		s.pullLoop()
	}()
	go func() {
		defer p.wg.Done()
		s.settleLoop()
	}()
}

func (s *proxySession) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// finishedLocked reports whether the session is done with: cancelled,
// holding nothing.
func (s *proxySession) finishedLocked() bool {
	return s.cancelled && s.outstanding == 0 && len(s.buffered) == 0
}

// limitLocked is the most deliveries the session may hold on the
// leader: none once cancelled (or for a get's), else its window, which
// bounds what it holds here too (a consumer that takes no more leaves
// the rest in buffered).
func (s *proxySession) limitLocked() int {
	if s.cancelled || s.rspec == nil {
		return 0
	}
	return s.window
}

// pullLoop pulls deliveries until the session is finished or the queue
// closes here.
func (s *proxySession) pullLoop() {
	rq := s.rq
	for {
		s.mu.Lock()
		if s.finishedLocked() {
			s.mu.Unlock()
			s.signal() // settleLoop ends it
			return
		}
		id := s.id
		req := &remoteRequest{Op: opPull, Queue: rq.q.id, Session: id, Pull: s.pulls + 1, Limit: s.limitLocked()}
		if !s.created {
			req.Create, req.Spec = true, s.rspec
		}
		s.mu.Unlock()
		reply, err := rq.call(rq.ctx, req)
		if rq.ctx.Err() != nil {
			return
		}
		if errors.Is(err, errHomeUnreachable) { // a classic queue's node is down (classic_remote.go)
			s.refused(err)
			return
		}
		if err == nil {
			err = replyError(reply)
			if err != nil { // the consumer is refused on the new leader (an exclusive one took its place)
				s.refused(err)
				return
			}
		}
		s.mu.Lock()
		if s.id == id {
			if err != nil || reply.Gone {
				s.restartLocked()
			} else {
				s.created, s.pulls = true, req.Pull
				s.takeLocked(reply.Deliveries)
			}
		}
		s.mu.Unlock()
		if err == nil && reply.TimedOut != 0 {
			s.timedOut(id, reply.TimedOut, reply.Timeout)
		}
	}
}

// timedOut tells the consumer, if it watches the consumer timeout, of a
// delivery of session id that the leader found past it.
func (s *proxySession) timedOut(id uint64, tag QueueTag, timeout time.Duration) {
	n, ok := s.spec.Consumer.(TimeoutNotifier)
	if !ok {
		return
	}
	if local, ok := s.rq.localTag(s, id, tag); ok {
		n.DeliveryTimedOut(local, timeout)
	}
}

// refused ends a consumer the leader no longer takes, as a deleted
// queue's (basic.cancel).
func (s *proxySession) refused(err error) {
	q := s.rq.q
	q.r.logger.Warn("mq: a consumer of a queue served elsewhere was refused or lost its queue's node; cancelled",
		"queue", q.name, "vhost", q.vh.name, "err", err)
	s.mu.Lock()
	s.cancelled, s.outstanding, s.buffered = true, 0, nil
	s.mu.Unlock()
	s.signal() // settleLoop ends it
	if s.spec.Cancelled != nil {
		s.spec.Cancelled()
	}
}

// restartLocked starts the session again (on the leader there is now,
// at the next pull): what the old one held is the leader's to return.
func (s *proxySession) restartLocked() {
	s.id, s.created, s.pulls = newSessionID(), false, 0
	s.outstanding, s.buffered = 0, nil
	s.ack, s.discard, s.queue = nil, nil, nil
	if s.rspec == nil { // a get's session: its message is returned
		s.cancelled = true
	}
}

// takeLocked takes pulled deliveries and hands them over while the
// consumer takes them.
func (s *proxySession) takeLocked(ds []remoteDelivery) {
	q := s.rq.q
	for _, rd := range ds {
		d, err := decodeRemote(q, rd)
		if err != nil {
			q.r.logger.Error("mq: a message pulled from a quorum queue's leader cannot be read; it is rejected",
				"queue", q.name, "vhost", q.vh.name, "err", err)
			s.discard = append(s.discard, rd.Tag)
			continue
		}
		s.buffered = append(s.buffered, &pendingDelivery{d: d, tag: rd.Tag})
	}
	s.deliverLocked()
	if s.cancelled { // pulled after a cancel: back to the queue
		for _, p := range s.buffered {
			s.queue = append(s.queue, p.tag)
		}
		s.buffered = nil
	}
	if len(s.discard)+len(s.queue) > 0 {
		s.signal()
	}
}

// deliverLocked hands buffered deliveries to the consumer while it takes
// them.
func (s *proxySession) deliverLocked() {
	if s.rspec == nil {
		return // a get's session: its message was handed over by get
	}
	for len(s.buffered) > 0 && !s.paused && !s.cancelled {
		p := s.buffered[0]
		noAck := s.rspec.NoAck
		if !noAck {
			p.d.Tag = s.holdLocked(p.tag)
		}
		if !s.spec.Consumer.TryDeliver(p.d) {
			if !noAck {
				s.rq.unhold(p.d.Tag)
			}
			s.paused = true
			return
		}
		s.buffered = s.buffered[1:]
		if !noAck {
			s.outstanding++
		}
	}
}

// holdLocked gives a message the session holds a tag of this node.
func (s *proxySession) holdLocked(tag QueueTag) QueueTag {
	local := s.rq.q.r.newTag()
	s.rq.mu.Lock()
	s.rq.tags[local] = remoteTag{s: s, session: s.id, tag: tag}
	s.rq.mu.Unlock()
	return local
}

// localTag is this node's tag for the leader's tag in session id of s.
func (rq *remoteQueue) localTag(s *proxySession, id uint64, tag QueueTag) (QueueTag, bool) {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	for local, rt := range rq.tags {
		if rt.s == s && rt.session == id && rt.tag == tag {
			return local, true
		}
	}
	return 0, false
}

func (rq *remoteQueue) unhold(tag QueueTag) {
	rq.mu.Lock()
	delete(rq.tags, tag)
	rq.mu.Unlock()
}

// settled records a settlement of a message held through the session
// (for settleLoop to send) and reports whether it was held by the
// current session: one of an earlier session is the leader's to return.
func (s *proxySession) settled(rt remoteTag, kind settleKind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rt.session != s.id {
		return false
	}
	switch kind {
	case settleAck:
		s.ack = append(s.ack, rt.tag)
	case settleDiscard:
		s.discard = append(s.discard, rt.tag)
	case settleRequeue:
		s.queue = append(s.queue, rt.tag)
	}
	s.outstanding--
	s.deliverLocked()
	return true
}

// resume is Subscription.Resume: the consumer takes deliveries again.
func (s *proxySession) resume() {
	s.mu.Lock()
	s.paused = false
	s.deliverLocked()
	s.mu.Unlock()
}

// cancel is Subscription.Cancel: no more deliveries; what was pulled and
// not handed over goes back to the queue; what the consumer holds stays
// held until it is settled (the front end requeues it when the channel
// closes), and then the session ends.
func (s *proxySession) cancel() {
	s.mu.Lock()
	if !s.cancelled {
		s.cancelled = true
		for _, p := range s.buffered {
			s.queue = append(s.queue, p.tag)
		}
		s.buffered = nil
	}
	s.mu.Unlock()
	s.signal()
}

// settleLoop sends settlements (and a cancel's limit of 0), and ends the session on the
// leader once it is finished.
func (s *proxySession) settleLoop() {
	rq := s.rq
	defer rq.forget(s)
	for {
		select {
		case <-s.wake:
		case <-rq.ctx.Done():
			return
		}
		for {
			s.mu.Lock()
			finished := s.finishedLocked()
			pending := len(s.ack)+len(s.discard)+len(s.queue) > 0
			if (!finished && !pending) || !s.created {
				s.mu.Unlock()
				if finished {
					return // never started on the leader (or restarted since): nothing to end
				}
				break
			}
			id := s.id
			req := &remoteRequest{Op: opSettle, Queue: rq.q.id, Session: id, Limit: s.limitLocked(),
				Ack: s.ack, Discard: s.discard, Requeue: s.queue}
			if finished {
				req.Op = opEnd
			}
			s.ack, s.discard, s.queue = nil, nil, nil
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(rq.ctx, syncWaitRemote)
			reply, err := rq.call(ctx, req)
			cancel()
			if finished || rq.ctx.Err() != nil {
				return
			}
			if err != nil || reply.Gone {
				s.mu.Lock()
				if s.id == id {
					s.restartLocked()
				}
				s.mu.Unlock()
			}
		}
	}
}
