package nats

import (
	"errors"
	"net"
	"os"
	"time"
)

// writeLoop is the connection's writer goroutine: it writes what out
// holds in batches, sends PINGs to a silent client and closes one that
// neither answers them nor authenticates in time. It closes the socket
// when the connection is shut and its last batch written.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	defer c.nc.Close()
	cfg := &c.srv.cfg
	pings := time.NewTicker(cfg.PingInterval)
	defer pings.Stop()
	var authDeadline <-chan time.Time
	if cfg.authRequired() {
		t := time.NewTimer(cfg.AuthTimeout)
		defer t.Stop()
		authDeadline = t.C
	}
	var batch chunkQueue
	var iov net.Buffers // batch's chunks as writev consumes them
	for {
		select {
		case <-c.out.wake:
		case <-pings.C:
			c.pingTick()
			continue
		case <-authDeadline:
			authDeadline = nil
			if !c.authenticated.Load() {
				c.fail(errAuthTimeout)
			}
			continue
		}
		closed := c.out.take(&batch)
		if batch.size > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(cfg.WriteDeadline))
			iov = append(iov[:0], batch.chunks...)
			if _, err := iov.WriteTo(c.nc); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					c.log.Warn("slow consumer detected: write deadline exceeded; closing", "write_deadline", cfg.WriteDeadline)
				} else {
					c.log.Debug("write failed", "err", err)
				}
				c.close(closeNow)
				return
			}
		}
		c.out.written(&batch)
		if closed {
			return
		}
	}
}

// pingTick PINGs a client that sent nothing since the last tick, and
// closes it once MaxPingsOut PINGs went unanswered.
func (c *conn) pingTick() {
	if c.heardFrom.Swap(false) {
		return
	}
	if int(c.pingsOut.Add(1)) > c.srv.cfg.MaxPingsOut {
		c.fail(errStale)
		return
	}
	c.queue(pingLine)
}
