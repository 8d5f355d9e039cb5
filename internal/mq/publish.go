package mq

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq/routing"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Publish routes a message and enqueues it on every queue it reaches, each
// at most once, even when several routes lead there.
//
// The exchange must exist (404) and not be internal (403), and an
// expiration property must be a valid TTL in ms (406, RabbitMQ's text).
// Routing follows exchange-to-exchange bindings (each exchange visited
// once, so cycles end) and, for an exchange whose own bindings match
// nothing, its alternate-exchange. Routing keys are the message's plus any
// in its CC and BCC headers (sender-selected distribution); BCC is removed
// before delivery. The observer of an exchange routing went through
// (ExchangeObserver) is given the message too, and a message its
// subscribers take is routed. A key of the default exchange that is a
// direct reply-to name of this node routes to its consumer (replyto.go).
// An unroutable message counts toward
// Unroutable and is dropped (Routed 0; the front end returns it if
// mandatory).
//
// A queue that is full with x-overflow reject-publish or
// reject-publish-dlx refuses the message (PublishResult.Rejected; the
// front end nacks it in confirm mode). Others apply their length limit
// (drop-head), TTL and priority to it. In a cluster, a message routed to
// a quorum queue served elsewhere, or to a classic queue of another node,
// is forwarded there and confirmed once it is committed (durable) there;
// a classic queue whose node is out of contact takes nothing, as in
// RabbitMQ (the message is unroutable if no other queue takes it).
//
// A persistent message (delivery mode 2) is appended to the log of every
// durable queue it reaches, any message to the log of a quorum queue;
// PublishResult.Durable then reports when those appends are fsynced. A
// stream queue gets the message as a record appended to its topic. A
// storage error fails the publish with 541 after the other queues got the
// message.
//
// A front end that publishes many messages in a row uses a Publisher
// instead, which batches stream appends and fsync waits.
func (v *VHost) Publish(m *Message) (PublishResult, error) {
	return v.publish(m, nil)
}

// publish is Publish, batched through pub when it is not nil.
func (v *VHost) publish(m *Message, pub *Publisher) (PublishResult, error) {
	if v.r.closed.Load() {
		return PublishResult{}, ErrClosed
	}
	if err := CheckExpiration(m.Properties.Expiration); err != nil {
		return PublishResult{}, err
	}
	v.r.awaitCaughtUp()
	keys, bcc := routingKeys(m)
	var buf [8]*queue
	v.mu.RLock()
	x := v.exchanges[m.Exchange]
	if x == nil && v.r.follower != nil { // maybe declared on another node just now
		v.mu.RUnlock()
		v.r.catchUp(exchangeKey(v.name, m.Exchange))
		v.mu.RLock()
		x = v.exchanges[m.Exchange]
	}
	if x == nil || v.deleted {
		v.mu.RUnlock()
		return PublishResult{}, errNotFound("exchange", m.Exchange, v.name)
	}
	if x.def.Internal {
		v.mu.RUnlock()
		return PublishResult{}, errAccessRefused("cannot publish to internal %s", resource("exchange", m.Exchange, v.name))
	}
	qs, observer := v.routeLocked(x, m, keys, buf[:0])
	var unknown []string
	if m.Exchange == "" && v.r.follower != nil && len(qs) < len(keys) {
		unknown = v.unknownQueueKeysLocked(keys)
	}
	v.mu.RUnlock()
	if len(unknown) > 0 && v.r.catchUp(unknown...) {
		// Addressed to a queue by name that this node does not know (by
		// its routing key, or in CC or BCC beside queues it knows): it
		// may have been declared on another node just now (declare-ok
		// came once the cluster committed it, which this node may not
		// have applied yet), as a lookup that misses catches up.
		v.mu.RLock()
		qs, observer = v.routeLocked(x, m, keys, buf[:0])
		v.mu.RUnlock()
	}
	if len(qs) == 0 && observer == nil && m.Exchange != "" && v.r.follower != nil && x.claimCatchUp(v.r.timers.coarse.Load()) {
		qs, observer = v.routeCaughtUp(x, m, keys, buf[:0])
	}

	if bcc {
		m = withoutBCC(m)
	}
	outside := 0 // takers that are no queue
	if routeOutside(observer, m) {
		outside = 1
	}
	if m.Exchange == "" {
		outside += v.deliverReplies(m, keys)
	}
	if len(qs) == 0 {
		if outside == 0 {
			v.unroutable.Add(1)
		}
		return PublishResult{Routed: outside}, nil
	}
	res, err := v.enqueue(m, qs, pub)
	res.Routed += outside
	if err == nil && res.Routed == 0 {
		v.unroutable.Add(1)
	}
	return res, err
}

// unroutableCatchUpMs is how often, at most, a publish through an
// exchange that reaches no queue catches up with the cluster's
// definitions before it is unroutable (routeCaughtUp), and
// unroutableCatchUpWait how long such a publish waits for it at most.
const (
	unroutableCatchUpMs   = 1000
	unroutableCatchUpWait = 250 * time.Millisecond
)

// routeCaughtUp routes m again from the exchange named as x once this
// node caught up with the cluster, for a publish through x that reached
// no queue: a binding made on another node just now (its bind-ok came
// once the cluster committed it) may not be applied here yet, and
// unlike a queue addressed by name (queueKeys) it cannot be named, so
// the catch-up waits for every definition (catchUpAll). That costs a
// write to the metadata log (about 2 ms on three local nodes), too much
// for every message to a fanout nobody is bound to: one publish through
// an exchange catches up per unroutableCatchUpMs at most (claimCatchUp,
// by the coarse clock: no clock read per message), and waits
// unroutableCatchUpWait at most, so that a node cut off from the
// metadata group's quorum stalls that publish a little, not its
// channel. So the first publish after a quiet while, which is how a
// client binds and then publishes, sees the binding; one through an
// exchange that caught up less than unroutableCatchUpMs ago may miss a
// binding for as long as this node lags (docs/replication.md).
func (v *VHost) routeCaughtUp(x *exchange, m *Message, keys []string, out []*queue) ([]*queue, ExchangeObserver) {
	if !v.r.catchUpAll(unroutableCatchUpWait) {
		return out, nil
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if now := v.exchanges[m.Exchange]; now != nil {
		x = now // declared again meanwhile
	}
	return v.routeLocked(x, m, keys, out)
}

// enqueue publishes m on the queues qs (routed already): the core of
// Publish, also used to dead-letter. With pub, stream records and the
// fsync wait are left to pub's next flush.
func (v *VHost) enqueue(m *Message, qs []*queue, pub *Publisher) (PublishResult, error) {
	var now int64 // read only when needed: the clock is not free
	var stored *storedMessage
	if needsLog(m, qs) {
		now = v.r.nowMs()
		props, err := encodeProperties(m)
		if err != nil {
			return PublishResult{}, amqpwire.Errorf(amqpwire.CodePreconditionFailed, "cannot encode message properties: %v", err)
		}
		stored = newStoredMessage(m, props, now)
	}
	h := &held{msg: m, size: int64(len(m.Body))}
	var res PublishResult
	var logged [8]replica.Target
	stores := logged[:0]
	var firstErr error
	streamed := false      // pub holds a record of m back
	var streamBatch []byte // without pub: the message as a stream record, built once
	for _, q := range qs {
		if q.stream != nil {
			if now == 0 {
				now = v.r.nowMs()
			}
			var appended bool
			var err error
			switch {
			case pub != nil && q.isDeleted():
			case pub != nil:
				if err = pub.addStream(q, m, now); err == nil {
					appended, streamed = true, true
				}
			default:
				if streamBatch == nil {
					streamBatch, err = encodeStreamRecord(m, now)
				}
				if err == nil {
					if appended, err = q.appendStream(streamBatch); appended {
						stores = append(stores, q.stream)
					}
				}
			}
			switch {
			case err != nil:
				// Refused like a full queue (a nack in confirm mode)
				// rather than closing the connection: the usual cause
				// is a message above the topic's max.message.bytes.
				// A message that cannot be encoded is never retried.
				v.r.logger.Error("mq: append to stream", "queue", q.name, "vhost", v.name, "topic", q.stream.topic, "err", err)
				res.Routed++
				res.Rejected++
			case appended:
				res.Routed++
			}
			continue
		}
		if q.forwards() && q.remote.homeDown() {
			continue // as in RabbitMQ, a queue whose node is down takes nothing: not routed there
		}
		if stored != nil && q.forwards() {
			res.Routed++
			stores = append(stores, q.remote.forwardBatch(stored.encoded())) // the confirm waits for the leader's answer
			continue
		}
		out, logged, backlog, err := q.publish(h, stored, now, pub != nil)
		if err != nil {
			v.r.logger.Error("mq: append to queue log", "queue", q.name, "vhost", v.name, "err", err)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		res.Backlog = max(res.Backlog, backlog)
		switch out {
		case taken:
			res.Routed++
		case refused:
			res.Routed++
			res.Rejected++
		}
		if logged != nil {
			if m := q.quorum.Load(); m != nil {
				logged = m.confirmTarget(logged)
			}
			stores = append(stores, logged)
		}
	}
	switch {
	case pub != nil && (streamed || len(stores) > 0):
		res.Durable = pub.join(stores)
	case len(stores) > 0:
		c := newCommit()
		c.n = 1
		v.r.awaitDurable(stores, c.finish)
		res.Durable = Durability{c: c}
	}
	if firstErr != nil {
		return res, errInternal("store message", firstErr)
	}
	return res, nil
}

// CheckExpiration checks an expiration property as RabbitMQ's channel
// does on basic.publish: "" (none) or a TTL in ms from 0 to ten years. The
// error is a 406 *Error with RabbitMQ's text. Publish checks it too; a
// front end buffering publishes (transactions) calls it at basic.publish.
func CheckExpiration(expiration string) error {
	if expiration == "" {
		return nil
	}
	if _, bad := parseExpiration(expiration); bad != "" {
		return errPrecondition("invalid expiration '%s': %s", expiration, bad)
	}
	return nil
}

// parseExpiration reads an expiration property as RabbitMQ's
// rabbit_basic:parse_expiration does: an integer number of ms, from 0 to
// ten years, nothing after it. On failure it returns the error term as
// RabbitMQ prints it.
func parseExpiration(s string) (int64, string) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i {
		return 0, "no_integer"
	}
	n, err := strconv.ParseInt(s[:j], 10, 64)
	if err != nil {
		return 0, fmt.Sprintf("{value_too_large,%s}", s[:j])
	}
	if j < len(s) {
		return 0, fmt.Sprintf("{leftover_string,%q}", s[j:])
	}
	if bad := checkExpiry(n); bad != "" {
		return 0, bad
	}
	return n, ""
}

// needsLog reports whether some queue of qs logs m: a durable queue if m
// is persistent, a quorum queue always (quorum queues persist every
// message, whatever its delivery mode, as in RabbitMQ).
func needsLog(m *Message, qs []*queue) bool {
	for _, q := range qs {
		if q.logs(m) || q.forwards() {
			return true
		}
	}
	return false
}

// routingKeys returns the message's routing key followed by the CC and BCC
// header keys, and whether BCC was present.
func routingKeys(m *Message) ([]string, bool) {
	keys := []string{m.RoutingKey}
	h := m.Properties.Headers
	if len(h) == 0 {
		return keys, false
	}
	keys = appendStrings(keys, h["CC"])
	bcc, hasBCC := h["BCC"]
	keys = appendStrings(keys, bcc)
	return keys, hasBCC
}

func appendStrings(keys []string, v any) []string {
	arr, ok := v.([]any)
	if !ok {
		return keys
	}
	for _, e := range arr {
		switch s := e.(type) {
		case string:
			keys = append(keys, s)
		case []byte:
			keys = append(keys, string(s))
		}
	}
	return keys
}

// withoutBCC returns a copy of m whose headers lack BCC: the recipients of
// a blind copy must not be revealed. Its properties are re-encoded.
func withoutBCC(m *Message) *Message {
	c := *m
	c.Properties.Headers = maps.Clone(m.Properties.Headers)
	delete(c.Properties.Headers, "BCC")
	c.RawProperties = nil
	return &c
}

// routeLocked collects the queues a message with these routing keys
// reaches from exchange x, as RabbitMQ's rabbit_exchange:route does: a
// worklist of exchanges, each visited once; an exchange whose bindings
// match nothing adds its alternate-exchange to the worklist. A
// consistent-hash exchange picks one destination by the hash of the first
// routing key (or the header or property it is set to hash). It also
// returns the observer of an exchange it went through (observer.go).
// Caller holds mu (read).
func (v *VHost) routeLocked(x *exchange, m *Message, keys []string, out []*queue) ([]*queue, ExchangeObserver) {
	headers := m.Properties.Headers
	// Linear deduplication while the set is small, a map beyond.
	var set map[*queue]struct{}
	addQueue := func(q *queue) {
		if set != nil {
			if _, dup := set[q]; !dup {
				set[q] = struct{}{}
				out = append(out, q)
			}
			return
		}
		if containsPtr(out, q) {
			return
		}
		out = append(out, q)
		if len(out) >= 32 {
			set = make(map[*queue]struct{}, 2*len(out))
			for _, have := range out {
				set[have] = struct{}{}
			}
		}
	}
	if x.bindings == nil { // the default exchange: a queue per routing key
		for _, k := range keys {
			if q := v.queues[k]; q != nil {
				addQueue(q)
			}
		}
		return out, nil
	}
	var observer ExchangeObserver
	var seenBuf, workBuf [4]*exchange
	seen := append(seenBuf[:0], x)
	work := append(workBuf[:0], x)
	for len(work) > 0 {
		cur := work[len(work)-1]
		work = work[:len(work)-1]
		if cur.observer != nil {
			observer = cur.observer
		}
		matched := false
		visit := func(d dest) {
			matched = true
			if d.q != nil {
				addQueue(d.q)
				return
			}
			if !containsPtr(seen, d.x) {
				seen = append(seen, d.x)
				work = append(work, d.x)
			}
		}
		if cur.kind == routing.ConsistentHash {
			cur.bindings.Route(cur.hashOn.Value(keys[0], &m.Properties), headers, visit)
		} else {
			for _, k := range keys {
				cur.bindings.Route(k, headers, visit)
				if cur.kind == routing.Fanout || cur.kind == routing.Headers {
					break // the key does not matter: one pass is enough
				}
			}
		}
		if !matched && cur.alternate != "" {
			if ae := v.exchanges[cur.alternate]; ae != nil && ae.bindings != nil && !containsPtr(seen, ae) {
				seen = append(seen, ae)
				work = append(work, ae)
			}
		}
	}
	return out, observer
}

// unknownQueueKeysLocked returns the definition keys of the queues
// names that the vhost does not hold, leaving out direct reply-to names
// (replyto.go), which are no queues. Caller holds mu.
func (v *VHost) unknownQueueKeysLocked(names []string) []string {
	var keys []string
	for _, name := range names {
		if v.queues[name] == nil && !strings.HasPrefix(name, replyToPrefix) {
			keys = append(keys, queueKey(v.name, name))
		}
	}
	return keys
}
