package mq

import "github.com/wharf-mq/wharf/internal/amqpwire"

// Subscription is one consumer of one queue (basic.consume).
type Subscription struct {
	q        *queue
	spec     ConsumeSpec
	priority int64           // x-priority
	notifier TimeoutNotifier // spec.Consumer, if it implements it
	group    *consumerGroup
	stream   *streamReader // a stream queue's consumer: its reader; nil otherwise
	// remote is, for a consumer of a quorum queue led elsewhere, its
	// session on the leader (quorum_proxy.go): set at Consume, or when the
	// queue stops being served here (followLeaderLocked); guarded by q.mu.
	remote *proxySession
	// replyVH is, for a consumer of amq.rabbitmq.reply-to (q nil), its
	// vhost, and replyTo the name replies to it are published under
	// (replyto.go).
	replyVH *VHost
	replyTo string

	// Guarded by q.mu.
	paused    bool // no credit: skipped until Resume
	cancelled bool
	unacked   int // deliveries to it not settled yet
}

// consumerGroup is the consumers of one priority: messages go round robin
// among those with credit.
type consumerGroup struct {
	priority int64
	subs     []*Subscription
	rr       int // subs index where the next round-robin search starts
	active   int // subs not paused
}

// Consume is basic.consume. The queue must exist (404) and, if exclusive,
// be conn's (405); an exclusive consumer cannot join a queue with consumers
// and no one can join a queue with an exclusive consumer (403). The
// argument x-priority (an integer, 406 otherwise) sets the consumer's
// priority: messages go to the highest-priority consumers that have
// credit, round robin among equals. In a single-active-consumer queue only
// the earliest registered consumer still subscribed receives messages.
//
// The subscription starts paused: nothing is delivered until the front end
// calls Resume, which it does after sending basic.consume-ok, so that no
// basic.deliver can overtake it.
//
// The queue amq.rabbitmq.reply-to is direct reply-to's pseudo-queue
// (replyto.go): the consumer, no-ack only, gets the replies published
// under its Subscription.ReplyTo name as they are published.
func (v *VHost) Consume(queue string, s ConsumeSpec) (*Subscription, error) {
	if s.Consumer == nil {
		panic("mq: ConsumeSpec.Consumer is nil")
	}
	if queue == ReplyToQueue {
		return v.consumeReplies(s)
	}
	q, err := v.accessQueue(queue, s.Conn)
	if err != nil && !(q != nil && q.reachable()) {
		return nil, err
	}
	if err := checkConsumeArgs(queue, v.name, s.Args); err != nil {
		return nil, err
	}
	switch {
	case q.reachable():
		return q.remote.consume(s)
	case q.stream != nil:
		return v.consumeStream(q, s)
	}
	return q.subscribe(s)
}

// subscribe adds a consumer to a queue served here.
func (q *queue) subscribe(s ConsumeSpec) (*Subscription, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return nil, errNotFound("queue", q.name, q.vh.name)
	}
	if q.exclusive || (s.Exclusive && len(q.consumers) > 0) {
		return nil, errAccessRefused("%s in exclusive use", resource("queue", q.name, q.vh.name))
	}
	sub := &Subscription{q: q, spec: s, paused: true}
	sub.priority, _ = argInt(s.Args["x-priority"])
	sub.notifier, _ = s.Consumer.(TimeoutNotifier)
	q.consumers = append(q.consumers, sub)
	q.joinGroupLocked(sub)
	q.hadConsumer = true
	q.exclusive = s.Exclusive
	return sub, nil
}

// joinGroupLocked adds a (paused) subscription to its priority's group.
func (q *queue) joinGroupLocked(s *Subscription) {
	i := 0
	for ; i < len(q.groups); i++ {
		g := q.groups[i]
		if g.priority == s.priority {
			g.subs = append(g.subs, s)
			s.group = g
			return
		}
		if g.priority < s.priority {
			break
		}
	}
	g := &consumerGroup{priority: s.priority, subs: []*Subscription{s}}
	s.group = g
	q.groups = append(q.groups, nil)
	copy(q.groups[i+1:], q.groups[i:])
	q.groups[i] = g
}

// leaveGroupLocked removes a subscription from its group.
func (q *queue) leaveGroupLocked(s *Subscription) {
	g := s.group
	for i, c := range g.subs {
		if c != s {
			continue
		}
		g.subs = append(g.subs[:i], g.subs[i+1:]...)
		if i < g.rr {
			g.rr--
		}
		if g.rr >= len(g.subs) {
			g.rr = 0
		}
		break
	}
	if !s.paused {
		g.active--
	}
	if len(g.subs) == 0 {
		for i, x := range q.groups {
			if x == g {
				q.groups = append(q.groups[:i], q.groups[i+1:]...)
				break
			}
		}
	}
}

// offerLocked offers a delivery to the consumers in turn and returns the
// one that took it, or nil. A consumer that refuses is paused.
func (q *queue) offerLocked(d *Delivery) *Subscription {
	if q.opts.singleActive {
		if len(q.consumers) == 0 {
			return nil
		}
		s := q.consumers[0]
		if s.paused {
			return nil
		}
		if s.spec.Consumer.TryDeliver(d) {
			return s
		}
		q.pauseLocked(s)
		return nil
	}
	for _, g := range q.groups {
		for n := len(g.subs); n > 0 && g.active > 0; n-- {
			s := g.subs[g.rr]
			g.rr = (g.rr + 1) % len(g.subs)
			if s.paused {
				continue
			}
			if s.spec.Consumer.TryDeliver(d) {
				return s
			}
			q.pauseLocked(s)
		}
	}
	return nil
}

func (q *queue) pauseLocked(s *Subscription) {
	s.paused = true
	q.active--
	s.group.active--
}

// Tag returns the consumer tag the subscription was made with.
func (s *Subscription) Tag() string { return s.spec.Tag }

// Resume says the consumer has credit again: delivery to it (re)starts.
func (s *Subscription) Resume() {
	if s.replyVH != nil {
		return // a reply is handed over when published or not at all
	}
	if s.stream != nil {
		s.stream.resume()
		return
	}
	q := s.q
	q.mu.Lock()
	if ps := s.remote; ps != nil { // it may follow the leader since Consume (followLeaderLocked)
		q.mu.Unlock()
		ps.resume()
		return
	}
	defer q.unlock()
	if s.cancelled {
		return
	}
	if s.paused {
		s.paused = false
		q.active++
		s.group.active++
	}
	q.dispatchLocked(nil)
}

// Cancel ends the subscription (basic.cancel, or its channel closing).
// Messages delivered to it and not settled stay unacknowledged until the
// front end settles them; in a single-active-consumer queue the next
// consumer gets nothing until they are settled or requeued, so that it
// continues in order. An auto-delete queue whose last consumer this was
// is deleted. Cancel after the queue was deleted does nothing.
func (s *Subscription) Cancel() {
	if s.replyVH != nil {
		s.cancelReplies()
		return
	}
	if s.stream != nil {
		s.cancelStream()
		return
	}
	q := s.q
	q.mu.Lock()
	if ps := s.remote; ps != nil { // it may follow the leader since Consume (followLeaderLocked)
		q.mu.Unlock()
		ps.cancel()
		return
	}
	if s.cancelled {
		q.mu.Unlock()
		return
	}
	s.cancelled = true
	for i, c := range q.consumers {
		if c == s {
			q.consumers = append(q.consumers[:i], q.consumers[i+1:]...)
			break
		}
	}
	q.leaveGroupLocked(s)
	if !s.paused {
		q.active--
	}
	if s.spec.Exclusive {
		q.exclusive = false
	}
	if q.opts.singleActive {
		q.fading += s.unacked
	}
	if len(q.consumers) == 0 {
		q.touchLocked()
	}
	autoDelete := q.def.AutoDelete && q.hadConsumer && len(q.consumers) == 0 && !q.deleted
	q.dispatchLocked(nil) // a single active consumer's successor takes over
	q.unlock()
	if autoDelete {
		q.vh.autoDelete(q)
	}
}

// Get is basic.get: it takes the message at the head of the queue, if any
// (false when empty), skipping (and dead-lettering) expired ones. With
// noAck it is settled at once. A direct reply-to name is 540 (replyto.go).
func (v *VHost) Get(queue string, noAck bool, conn ConnID) (*Delivery, bool, error) {
	if err := v.checkGettable(queue); err != nil {
		return nil, false, err
	}
	q, err := v.accessQueue(queue, conn)
	if q != nil && q.reachable() {
		return q.remote.get(noAck)
	}
	if err != nil {
		return nil, false, err
	}
	if q.stream != nil {
		return nil, false, errStreamNotSupported("basic.get", queue, v.name)
	}
	return q.get(noAck)
}

// get is basic.get on a queue served here.
func (q *queue) get(noAck bool) (*Delivery, bool, error) {
	queue, v := q.name, q.vh
	q.mu.Lock()
	defer q.unlock()
	if q.deleted {
		return nil, false, errNotFound("queue", queue, v.name)
	}
	q.touchLocked()
	var now int64
	for {
		e, l := q.ready.Head()
		if e == nil || q.uncommittedLocked(e) {
			return nil, false, nil
		}
		if e.msg == nil && !q.pageInLocked(l) {
			if q.damage != nil {
				return nil, false, errCrashed(queue, v.name)
			}
			return nil, false, amqpwire.Errorf(amqpwire.CodeInternalError, "cannot read message from %s", resource("queue", queue, v.name))
		}
		q.ready.popLevel(l)
		if q.pastDeliveryLimitLocked(e) {
			if now == 0 {
				now = q.r.nowMs()
			}
			q.discardLocked(e, reasonDeliveryLimit, now)
			continue
		}
		if e.expiresAt != 0 {
			if now == 0 {
				now = q.r.nowMs()
			}
			if e.expiresAt <= now {
				q.discardLocked(e, reasonExpired, now)
				continue
			}
		}
		d := q.deliveryLocked(e)
		d.MessageCount = q.ready.Len()
		q.handOverLocked(e, d, nil, noAck)
		q.armHeadsLocked()
		return d, true, nil
	}
}
