package jetstream

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// pullRequest is a pull consumer's request for messages, waiting in its
// queue until its batch is delivered, its max_bytes reached or it expires.
type pullRequest struct {
	reply     string
	batch     int
	maxBytes  int
	expires   time.Time // zero: never
	noWait    bool
	heartbeat time.Duration
	nextBeat  time.Time
	sent      int
	sentBytes int
}

// NextRequest is a pull request as CONSUMER.MSG.NEXT carries it.
type NextRequest struct {
	Expires   time.Duration `json:"expires,omitempty"`
	Batch     int           `json:"batch,omitempty"`
	MaxBytes  int           `json:"max_bytes,omitempty"`
	NoWait    bool          `json:"no_wait,omitempty"`
	Heartbeat time.Duration `json:"idle_heartbeat,omitempty"`
}

// Next queues a pull request whose messages go to reply. A request to a
// consumer that does not exist gets no answer, as from nats-server; one
// the consumer refuses gets a status message on reply.
func (svc *Service) Next(stream, consumer, reply string, req NextRequest) {
	s, _ := svc.stream(stream)
	if s == nil || reply == "" {
		return
	}
	now := time.Now()
	s.mu.Lock()
	c := s.consumers[consumer]
	if c == nil {
		s.mu.Unlock()
		return
	}
	status := c.queueRequestLocked(reply, req, now)
	s.mu.Unlock()
	if out := svc.outboxOnceStarted(); status != nil && out != nil {
		out.Send(reply, &status.msg)
	}
}

// BadNextRequest answers a pull request that could not be read, as
// nats-server does.
func (svc *Service) BadNextRequest(reply string, err error) {
	if out := svc.outboxOnceStarted(); out != nil && reply != "" {
		r := &pullRequest{reply: reply}
		st := r.status("400", fmt.Sprintf("Bad Request - %v", err))
		out.Send(reply, &st.msg)
	}
}

// queueRequestLocked checks a pull request against the consumer's limits
// and queues it; a refusal is the status message to send.
func (c *consumer) queueRequestLocked(reply string, req NextRequest, now time.Time) *outgoing {
	r := &pullRequest{reply: reply, batch: max(req.Batch, 1), maxBytes: req.MaxBytes, noWait: req.NoWait, heartbeat: req.Heartbeat}
	refuse := func(code, text string) *outgoing {
		st := r.status(code, text)
		return &st
	}
	if c.cfg.push() {
		return refuse("409", "Consumer is push based")
	}
	if req.Heartbeat > 0 && req.Heartbeat*2 > req.Expires {
		return refuse("400", "Bad Request - heartbeat value too large")
	}
	if req.Expires > 0 {
		r.expires = now.Add(req.Expires)
	}
	if r.heartbeat > 0 {
		r.nextBeat = now.Add(r.heartbeat)
	}
	switch {
	case c.cfg.MaxRequestBatch > 0 && r.batch > c.cfg.MaxRequestBatch:
		return refuse("409", fmt.Sprintf("Exceeded MaxRequestBatch of %d", c.cfg.MaxRequestBatch))
	case req.Expires > 0 && c.cfg.MaxRequestExpires > 0 && req.Expires > c.cfg.MaxRequestExpires:
		return refuse("409", fmt.Sprintf("Exceeded MaxRequestExpires of %v", c.cfg.MaxRequestExpires))
	case r.maxBytes > 0 && c.cfg.MaxRequestMaxBytes > 0 && r.maxBytes > c.cfg.MaxRequestMaxBytes:
		return refuse("409", fmt.Sprintf("Exceeded MaxRequestMaxBytes of %v", c.cfg.MaxRequestMaxBytes))
	}
	c.lastActive = now
	if r.noWait && r.expires.IsZero() && c.npending+uint64(len(c.redeliver)) == 0 {
		return refuse("404", "No Messages")
	}
	if len(c.waiting) >= c.cfg.MaxWaiting {
		// Make room, as nats-server does, by dropping the requests that
		// expired and those whose clients went away.
		c.waiting = slices.DeleteFunc(c.waiting, func(w *pullRequest) bool {
			return !w.expires.IsZero() && now.After(w.expires) || c.out != nil && !c.out.Interest(w.reply)
		})
	}
	if len(c.waiting) >= c.cfg.MaxWaiting {
		if r.heartbeat > 0 {
			return nil // it will miss heartbeats and ask again, as with nats-server
		}
		return refuse("409", "Exceeded MaxWaiting")
	}
	c.waiting = append(c.waiting, r)
	c.signal()
	return nil
}

// status is a status message to the request's client: what ends it, or
// refuses it, with what is left of its batch and bytes.
func (r *pullRequest) status(code, description string) outgoing {
	var hdr []byte
	switch code {
	case "408", "409":
		if description == "Message Size Exceeds MaxBytes" || description == "Request Timeout" {
			hdr = statusHeader(code, description,
				field("Nats-Pending-Messages", strconv.Itoa(r.batch-r.sent)),
				field("Nats-Pending-Bytes", strconv.Itoa(max(r.maxBytes-r.sentBytes, 0))))
			break
		}
		fallthrough
	default:
		hdr = statusHeader(code, description)
	}
	return outgoing{to: r.reply, msg: OutMessage{Subject: r.reply, Header: hdr}}
}

func (c *consumer) dropRequestLocked(r *pullRequest) {
	if i := slices.Index(c.waiting, r); i >= 0 {
		c.waiting = slices.Delete(c.waiting, i, i+1)
	}
}

// expireRequestsLocked ends the requests whose time is up with 408.
func (c *consumer) expireRequestsLocked(now time.Time, sends []outgoing) []outgoing {
	for _, r := range slices.Clone(c.waiting) {
		if !r.expires.IsZero() && !now.Before(r.expires) {
			sends = append(sends, r.status("408", "Request Timeout"))
			c.dropRequestLocked(r)
			c.lastActive = now
		}
	}
	return sends
}

// endNoWaitLocked ends the no_wait requests that have got what there is:
// 404 for one without expiry or that got messages; one with an expiry
// that got none waits for it (nats-server's rule).
func (c *consumer) endNoWaitLocked(now time.Time, sends []outgoing, more bool) []outgoing {
	if more {
		return sends
	}
	exhausted := c.maxAckPendingReached() || c.npending == 0 && len(c.redeliver) == 0
	if !exhausted {
		return sends
	}
	for _, r := range slices.Clone(c.waiting) {
		if r.noWait && (r.expires.IsZero() || r.sent > 0) {
			sends = append(sends, r.status("404", "No Messages"))
			c.dropRequestLocked(r)
			c.lastActive = now
		}
	}
	return sends
}
