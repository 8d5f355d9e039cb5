package mq

import (
	"maps"

	"github.com/wharf-mq/wharf/internal/amqp/wire"
	"github.com/wharf-mq/wharf/internal/mq/routing"
)

// Publish routes a message and enqueues it on every queue it reaches, each
// at most once, even when several routes lead there.
//
// The exchange must exist (404) and not be internal (403). Routing follows
// exchange-to-exchange bindings (each exchange visited once, so cycles end)
// and, for an exchange whose own bindings match nothing, its
// alternate-exchange. Routing keys are the message's plus any in its CC and
// BCC headers (sender-selected distribution); BCC is removed before
// delivery. An unroutable message counts toward Unroutable and is dropped
// (Routed 0; the front end returns it if mandatory).
//
// A persistent message (delivery mode 2) is appended to the log of every
// durable queue it reaches; PublishResult.Durable then reports when those
// appends are fsynced. A storage error fails the publish with 541 after the
// other queues got the message.
func (v *VHost) Publish(m *Message) (PublishResult, error) {
	if v.r.closed.Load() {
		return PublishResult{}, ErrClosed
	}
	keys, bcc := routingKeys(m)
	var buf [8]*queue
	v.mu.RLock()
	x := v.exchanges[m.Exchange]
	if x == nil || v.deleted {
		v.mu.RUnlock()
		return PublishResult{}, errNotFound("exchange", m.Exchange, v.name)
	}
	if x.def.Internal {
		v.mu.RUnlock()
		return PublishResult{}, errAccessRefused("cannot publish to internal %s", resource("exchange", m.Exchange, v.name))
	}
	qs := v.routeLocked(x, keys, m.Properties.Headers, buf[:0])
	v.mu.RUnlock()

	if len(qs) == 0 {
		v.unroutable.Add(1)
		return PublishResult{}, nil
	}
	if bcc {
		m = withoutBCC(m)
	}
	var batch []byte
	if m.Properties.DeliveryMode == 2 && anyDurable(qs) {
		props, err := encodeProperties(m)
		if err != nil {
			return PublishResult{}, wire.Errorf(wire.CodePreconditionFailed, "cannot encode message properties: %v", err)
		}
		batch = encodeMessage(m, props)
	}
	h := &held{msg: m, size: int64(len(m.Body))}
	var res PublishResult
	var logged [8]*queueStore
	stores := logged[:0]
	var firstErr error
	for _, q := range qs {
		took, wasLogged, err := q.publish(h, batch)
		if err != nil {
			v.r.logger.Error("mq: append to queue log", "queue", q.name, "vhost", v.name, "err", err)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if took {
			res.Routed++
		}
		if wasLogged {
			stores = append(stores, q.store)
		}
	}
	if len(stores) > 0 {
		res.Durable = v.r.syncer.await(stores)
	}
	if firstErr != nil {
		return res, errInternal("store message", firstErr)
	}
	if res.Routed == 0 {
		v.unroutable.Add(1)
	}
	return res, nil
}

func anyDurable(qs []*queue) bool {
	for _, q := range qs {
		if q.store != nil {
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

// routeLocked collects the queues a message reaches from exchange x, as
// RabbitMQ's rabbit_exchange:route does: a worklist of exchanges, each
// visited once; an exchange whose bindings match nothing adds its
// alternate-exchange to the worklist. Caller holds mu (read).
func (v *VHost) routeLocked(x *exchange, keys []string, headers wire.Table, out []*queue) []*queue {
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
		return out
	}
	var seenBuf, workBuf [4]*exchange
	seen := append(seenBuf[:0], x)
	work := append(workBuf[:0], x)
	for len(work) > 0 {
		cur := work[len(work)-1]
		work = work[:len(work)-1]
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
		for _, k := range keys {
			cur.bindings.Route(k, headers, visit)
			if cur.kind == routing.Fanout || cur.kind == routing.Headers {
				break // the key does not matter: one pass is enough
			}
		}
		if !matched && cur.alternate != "" {
			if ae := v.exchanges[cur.alternate]; ae != nil && ae.bindings != nil && !containsPtr(seen, ae) {
				seen = append(seen, ae)
				work = append(work, ae)
			}
		}
	}
	return out
}
