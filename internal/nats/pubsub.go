package nats

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/subjects"
)

// subscription is one SUB of a connection: the router's Sink for it.
type subscription struct {
	conn  *conn
	sid   []byte
	route *subjects.Subscription
	// delivered counts messages handed to it; max, once UNSUB gave one,
	// is how many it may receive in all (0: no limit).
	delivered atomic.Int64
	max       atomic.Int64
}

func (c *conn) sub(subject, queue, sid []byte) error {
	c.subsMu.Lock()
	if c.subs == nil { // closed meanwhile (cut off as a slow consumer)
		c.subsMu.Unlock()
		return nil
	}
	// A sid already in use leaves the first subscription as it is.
	if _, dup := c.subs[string(sid)]; !dup {
		s := &subscription{conn: c, sid: append([]byte(nil), sid...)}
		route, err := c.srv.router.Subscribe(string(subject), string(queue), s)
		if err != nil {
			c.subsMu.Unlock()
			c.sendErr(errInvalidSubject)
			return nil
		}
		s.route = route
		c.subs[string(sid)] = s
	}
	c.subsMu.Unlock()
	if c.opts.Verbose {
		c.sendOK()
	}
	return nil
}

// unsub removes the subscription sid at once, or after max messages in
// all when max is more than it has already received.
func (c *conn) unsub(sid []byte, max int) error {
	c.subsMu.Lock()
	if s := c.subs[string(sid)]; s != nil {
		if max > 0 && int64(max) > s.delivered.Load() {
			s.max.Store(int64(max))
		} else {
			c.removeLocked(s)
		}
	}
	c.subsMu.Unlock()
	if c.opts.Verbose {
		c.sendOK()
	}
	return nil
}

// remove takes s out of the connection and the router, once.
func (c *conn) remove(s *subscription) {
	c.subsMu.Lock()
	c.removeLocked(s)
	c.subsMu.Unlock()
}

func (c *conn) removeLocked(s *subscription) {
	if c.subs != nil && c.subs[string(s.sid)] == s {
		delete(c.subs, string(s.sid))
		c.srv.router.Unsubscribe(s.route)
	}
}

func (c *conn) pubArgs(p *pubArgs) error {
	if p.headerLen >= 0 && !c.headers.Load() {
		return errProtocol
	}
	if p.size > c.srv.cfg.MaxPayload {
		c.log.Warn("maximum payload exceeded", "size", p.size, "max_payload", c.srv.cfg.MaxPayload)
		return errMaxPayload
	}
	// Pedantic clients are told, and the message is routed all the same
	// (to nobody, for a subject with an empty token), as nats-server does.
	if c.opts.Pedantic && !subjects.ValidLiteral(string(p.subject)) {
		c.sendErr(errInvalidPublishSubject)
	}
	return nil
}

func (c *conn) msg(p *pubArgs, body []byte) error {
	if c.opts.Verbose {
		c.sendOK()
	}
	m := &c.pubMsg
	m.Subject, m.Reply, m.Header, m.Payload = p.subject, p.reply, nil, body
	if p.hasHeader() {
		m.Header, m.Payload = body[:p.headerLen], body[p.headerLen:]
	}
	delivered := c.cache.Match(c.srv.router, p.subject).Deliver(m)
	if !delivered && len(p.reply) > 0 && c.opts.NoResponders {
		c.noResponders(p.subject, p.reply)
	}
	m.Subject, m.Reply, m.Header, m.Payload = nil, nil, nil, nil
	return nil
}

// noResponders answers a request nobody received with the 503 status
// message nats-server sends, on the requester's own subscription to the
// reply subject.
func (c *conn) noResponders(subject, reply []byte) {
	for _, rs := range c.srv.router.Match(reply).Plain {
		s, ok := rs.Sink().(*subscription)
		if !ok || s.conn != c {
			continue
		}
		header := append([]byte("NATS/1.0 503\r\nNats-Subject: "), subject...)
		header = append(header, "\r\n\r\n"...)
		line := msgLine(nil, s.sid, &subjects.Message{Subject: reply, Header: header}, true)
		c.queue(append(append(line, header...), crlf...))
		return
	}
}

// Deliver queues m for the subscription's client as MSG, or HMSG when it
// has headers and the client takes them (to a client that does not, the
// payload goes alone, as nats-server does).
func (s *subscription) Deliver(m *subjects.Message) bool {
	c := s.conn
	publisher, fromClient := m.Source.(*conn)
	if publisher == c && !c.echo.Load() {
		return false
	}
	n := s.delivered.Add(1)
	if limit := s.max.Load(); limit > 0 {
		if n > limit {
			c.remove(s)
			return false
		}
		if n == limit {
			defer c.remove(s)
		}
	}
	withHeader := m.Header != nil && c.headers.Load()
	var scratch [256]byte
	line := msgLine(scratch[:0], s.sid, m, withHeader)
	header := m.Header
	if !withHeader {
		header = nil
	}

	o := &c.out
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	overLimit := o.writeLocked(line, header, m.Payload, crlf)
	stall := o.stall
	o.mu.Unlock()

	if overLimit {
		c.slowConsumer()
		return true // it matched a live subscriber: no 503 for it
	}
	if !fromClient || !publisher.flushLater(c) {
		o.signal()
	}
	if stall != nil && fromClient {
		o.signal()
		publisher.stallOn(stall)
	}
	return true
}

var crlf = []byte("\r\n")

// msgLine appends the MSG or HMSG control line of m for subscription sid
// to b.
func msgLine(b, sid []byte, m *subjects.Message, withHeader bool) []byte {
	if withHeader {
		b = append(b, "HMSG "...)
	} else {
		b = append(b, "MSG "...)
	}
	b = append(b, m.Subject...)
	b = append(b, ' ')
	b = append(b, sid...)
	b = append(b, ' ')
	if len(m.Reply) > 0 {
		b = append(b, m.Reply...)
		b = append(b, ' ')
	}
	if withHeader {
		b = strconv.AppendInt(b, int64(len(m.Header)), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(len(m.Header)+len(m.Payload)), 10)
	} else {
		b = strconv.AppendInt(b, int64(len(m.Payload)), 10)
	}
	return append(b, "\r\n"...)
}

// maxFlushBatch bounds the connections a read remembers to wake; beyond
// it they are woken at once rather than searched for.
const maxFlushBatch = 64

// flushLater remembers to wake target's writer once the current read is
// parsed, and reports whether it will.
func (c *conn) flushLater(target *conn) bool {
	for i := len(c.toFlush) - 1; i >= 0; i-- {
		if c.toFlush[i] == target {
			return true
		}
	}
	if len(c.toFlush) == maxFlushBatch {
		return false
	}
	c.toFlush = append(c.toFlush, target)
	return true
}

// flushTargets wakes the writers of every connection given messages
// during the read just parsed.
func (c *conn) flushTargets() {
	for i, t := range c.toFlush {
		t.out.signal()
		c.toFlush[i] = nil
	}
	c.toFlush = c.toFlush[:0]
}

// How long a publisher waits for a subscriber falling behind, as in
// nats-server: a short wait per message, at most stallTotal per read.
const (
	stallShort = 2 * time.Millisecond
	stallTotal = 10 * time.Millisecond
)

// stallOn waits, within the current read's budget, for a subscriber's
// writer to work off its backlog (stall is closed when it has).
func (c *conn) stallOn(stall chan struct{}) {
	wait := min(stallShort, c.stallLeft)
	if wait <= 0 {
		return
	}
	start := time.Now()
	t := time.NewTimer(wait)
	select {
	case <-stall:
	case <-t.C:
	}
	t.Stop()
	c.stallLeft -= time.Since(start)
}
