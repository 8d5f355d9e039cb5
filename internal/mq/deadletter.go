package mq

import (
	"maps"
	"slices"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Dead-lettering, as RabbitMQ 4.x does it (rabbit_dead_letter, mc): a
// message rejected without requeue, expired, dropped by a length limit or
// past the delivery limit is republished, at most once, to the queue's
// x-dead-letter-exchange with its x-dead-letter-routing-key (or its own
// routing keys). The copy keeps body and properties, loses its expiration
// (recorded as original-expiration) and records the death in the x-death
// header: one table per (queue, reason), most recent first, whose count
// grows each time the message dies again for the same reason in the same
// queue; x-first-death-* and x-last-death-* name the first and latest
// death. A copy that would come back to a queue it already died in, with
// no rejection on the way, is dropped for that queue: such a cycle would
// never end.
//
// Unlike RabbitMQ 4.x, which keeps deaths as broker-side annotations and
// ignores x-death headers set by publishers, Wharf reads the x-death header
// the message carries, so a message a client republishes with its headers
// keeps counting (RabbitMQ 3.x behaviour).

// deathReason is why a message was dead-lettered.
type deathReason string

const (
	reasonRejected      deathReason = "rejected"
	reasonExpired       deathReason = "expired"
	reasonMaxlen        deathReason = "maxlen"
	reasonDeliveryLimit deathReason = "delivery_limit"
)

// deadLetter is a message waiting to be dead-lettered by its queue.
type deadLetter struct {
	msg    *Message
	reason deathReason
	at     int64 // ms
	// target is where the queue's options sent it when it died: a policy
	// may change them before the letter is published.
	target deadLetterTarget
}

// deadLetterTarget is a queue's dead-letter exchange and routing key.
type deadLetterTarget struct {
	dlx     string
	dlrk    string
	hasDLRK bool
}

// deadLetterLocked queues m for dead-lettering when the lock is released,
// if the queue has a dead-letter exchange.
func (q *queue) deadLetterLocked(m *Message, reason deathReason, now int64) {
	if !q.opts.hasDLX {
		return
	}
	t := deadLetterTarget{dlx: q.opts.dlx, dlrk: q.opts.dlrk, hasDLRK: q.opts.hasDLRK}
	q.outbox = append(q.outbox, deadLetter{msg: m, reason: reason, at: now, target: t})
}

// publishDeadLetters republishes src's dead letters through its
// dead-letter exchange. No lock may be held. A dead-letter exchange that
// does not exist drops them, as in RabbitMQ.
func (v *VHost) publishDeadLetters(src *queue, dls []deadLetter) {
	for _, dl := range dls {
		m, deaths := deadLetterMessage(src.name, dl)
		keys, _ := routingKeys(m)
		var buf [8]*queue
		v.mu.RLock()
		x := v.exchanges[dl.target.dlx]
		if x == nil || v.deleted {
			v.mu.RUnlock()
			continue
		}
		qs, observer := v.routeLocked(x, m, keys, buf[:0])
		v.mu.RUnlock()
		routeOutside(observer, m)
		if dl.reason != reasonRejected {
			qs = slices.DeleteFunc(qs, func(q *queue) bool { return isDeathCycle(q.name, deaths) })
		}
		if len(qs) == 0 {
			continue
		}
		if _, err := v.enqueue(m, qs, nil); err != nil {
			v.r.logger.Error("mq: dead-letter message", "queue", src.name, "vhost", v.name, "err", err)
		}
	}
}

// deadLetterMessage builds the copy of dl's message that goes to the
// dead-letter exchange, and returns it with its new x-death list.
func deadLetterMessage(queue string, dl deadLetter) (*Message, []any) {
	o := &dl.target
	old := dl.msg
	m := &Message{Exchange: o.dlx, RoutingKey: old.RoutingKey, Properties: old.Properties, Body: old.Body}
	h := maps.Clone(old.Properties.Headers)
	if h == nil {
		h = amqpwire.Table{}
	}
	keys, _ := routingKeys(old) // the message's key and CC (BCC is gone since it was published)
	deaths := recordDeath(h["x-death"], queue, dl.reason, old.Exchange, keys, old.Properties.Expiration, dl.at)
	h["x-death"] = deaths
	if _, seen := h["x-first-death-reason"]; !seen {
		h["x-first-death-queue"] = queue
		h["x-first-death-reason"] = string(dl.reason)
		h["x-first-death-exchange"] = old.Exchange
	}
	h["x-last-death-queue"] = queue
	h["x-last-death-reason"] = string(dl.reason)
	h["x-last-death-exchange"] = old.Exchange
	if o.hasDLRK {
		m.RoutingKey = o.dlrk
		delete(h, "CC") // the new routing key replaces all the old ones
	}
	m.Properties.Headers = h
	m.Properties.Expiration = ""
	m.Properties.Present &^= amqpwire.FlagExpiration
	return m, deaths
}

// recordDeath returns the x-death list with this death recorded: the
// (queue, reason) entry's count incremented and moved to the front, or a
// new entry in front.
func recordDeath(header any, queue string, reason deathReason, exchange string, keys []string, expiration string, at int64) []any {
	old, _ := header.([]any)
	for i, d := range old {
		t := asTable(d)
		if t == nil || str(t["queue"]) != queue || str(t["reason"]) != string(reason) {
			continue
		}
		updated := maps.Clone(t)
		n, _ := argInt(t["count"])
		updated["count"] = n + 1
		out := make([]any, 0, len(old))
		out = append(out, updated)
		out = append(out, old[:i]...)
		return append(out, old[i+1:]...)
	}
	rks := make([]any, len(keys))
	for i, k := range keys {
		rks[i] = k
	}
	death := amqpwire.Table{
		"count":        int64(1),
		"reason":       string(reason),
		"queue":        queue,
		"time":         time.Unix(at/1000, 0).UTC(),
		"exchange":     exchange,
		"routing-keys": rks,
	}
	if expiration != "" {
		death["original-expiration"] = expiration
	}
	return append([]any{death}, old...)
}

// isDeathCycle reports whether dead-lettering to target closes a cycle
// with no rejection in it: going through the deaths from the most recent,
// target's queue comes before any rejected one.
func isDeathCycle(target string, deaths []any) bool {
	for _, d := range deaths {
		t := asTable(d)
		if str(t["reason"]) == string(reasonRejected) {
			return false
		}
		if str(t["queue"]) == target {
			return true
		}
	}
	return false
}

func asTable(v any) map[string]any {
	switch t := v.(type) {
	case amqpwire.Table:
		return t
	case map[string]any:
		return t
	}
	return nil
}

func str(v any) string {
	s, _ := argString(v)
	return s
}

// DeathCount returns how many times a delivered message died in queue for
// reason ("rejected", "expired", "maxlen", "delivery_limit"), from its
// x-death header: what a consumer of a retry ladder reads. 0 if never.
func DeathCount(m *Message, queue, reason string) int64 {
	deaths, _ := m.Properties.Headers["x-death"].([]any)
	for _, d := range deaths {
		t := asTable(d)
		if str(t["queue"]) == queue && str(t["reason"]) == reason {
			n, _ := argInt(t["count"])
			return n
		}
	}
	return 0
}

// withDeliveryCount returns m with the x-delivery-count header set to n
// (a shallow copy: body and the other headers are shared).
func withDeliveryCount(m *Message, n uint32) *Message {
	c := *m
	c.Properties.Headers = maps.Clone(m.Properties.Headers)
	if c.Properties.Headers == nil {
		c.Properties.Headers = amqpwire.Table{}
	}
	c.Properties.Headers["x-delivery-count"] = int64(n)
	c.RawProperties = nil
	return &c
}
