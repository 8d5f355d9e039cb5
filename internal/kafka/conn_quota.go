package kafka

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/quota"
)

// Client quotas (internal/quota, set with AlterClientQuotas): once a
// request is handled, its produce bytes (the request's size), fetch bytes
// (the response's) and handling time are recorded against the quotas of
// its user and client id. A client over one is throttled as Kafka does
// since KIP-219: its response says throttle_time_ms, and the connection
// reads nothing more from the client until that time has passed. A
// throttled fetch still carries its records (Kafka sends an empty one);
// the mute that follows brings the average back to the quota all the
// same.

// quotaUser is the user a request's quotas are looked up for: the
// principal's name, ANONYMOUS for an unauthenticated one.
func quotaUser(principal string) string {
	if _, name, ok := strings.Cut(principal, ":"); ok {
		return name
	}
	return "ANONYMOUS"
}

// requestQuotaExempt are the requests Kafka never throttles for time:
// what a client needs before it can be told anything else.
func requestQuotaExempt(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return true
	}
	return false
}

// applyQuotas records r (whose frame was frameSize bytes) against its
// client's quotas and, if it is over one, sets the response's throttle
// time and mutes the connection for it.
func (c *conn) applyQuotas(r *request, resp *response, frameSize int64) {
	q := c.s.cfg.Quotas
	if q == nil || resp == nil {
		return
	}
	now := time.Now()
	user, client := quotaUser(r.principal), r.header.clientID
	var throttle time.Duration
	switch r.msg.(type) {
	case *kmsg.ProduceRequest:
		throttle = q.Record(quota.ProducerByteRate, user, client, float64(frameSize), now)
	case *kmsg.FetchRequest:
		size := int64(0)
		if resp.fetch != nil {
			size = resp.fetch.size()
		}
		throttle = q.Record(quota.ConsumerByteRate, user, client, float64(size), now)
	}
	if !requestQuotaExempt(r.header.key) {
		busy := now.Sub(r.received) - r.waited
		throttle = max(throttle, q.Record(quota.RequestPercentage, user, client, quota.RequestPercentageOf(busy), now))
	}
	if throttle <= 0 {
		return
	}
	if tr, ok := resp.msg.(kmsg.ThrottleResponse); ok {
		if current, _ := tr.Throttle(); int64(current) < throttle.Milliseconds() {
			resp.msg.(kmsg.SetThrottleResponse).SetThrottle(int32(min(throttle.Milliseconds(), 1<<31-1)))
		}
	}
	c.muteFor(throttle)
}

// muteFor makes the reader wait d before it serves the next request.
func (c *conn) muteFor(d time.Duration) {
	until := monoNow() + int64(d)
	for {
		cur := c.mutedUntil.Load()
		if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitUnmuted waits out a throttle before a request is handled; it
// returns false if the connection stops meanwhile.
func (c *conn) waitUnmuted() bool {
	d := time.Duration(c.mutedUntil.Load() - monoNow())
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.stop:
		return false
	}
}
