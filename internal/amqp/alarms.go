package amqp

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// diskCheckInterval bounds how often free disk space is read.
const diskCheckInterval = time.Second

// alarms implements RabbitMQ's resource alarms. While the registry holds
// more message bytes than the memory high-water mark, or the data
// directory's file system has less free space than the disk limit,
// publishing connections are blocked: a connection that publishes stops
// being read until every alarm clears, and clients that announced the
// connection.blocked capability are told with connection.blocked and
// connection.unblocked. Connections that only consume keep going, which
// is what drains memory.
type alarms struct {
	srv *Server

	memoryLimit atomic.Int64 // high-water mark in bytes; <= 0 disables
	diskLimit   atomic.Int64 // minimum free bytes; <= 0 disables
	active      atomic.Bool  // any alarm on: the publish fast path checks only this

	mu            sync.Mutex
	memory, disk  bool
	released      chan struct{} // non-nil while an alarm is on; closed when all clear
	lastDiskCheck time.Time
}

func newAlarms(s *Server) *alarms {
	a := &alarms{srv: s}
	a.memoryLimit.Store(s.cfg.MemoryHighWatermark)
	if s.cfg.DataDir != "" {
		a.diskLimit.Store(s.cfg.DiskFreeLimit)
	}
	return a
}

// run re-evaluates the alarms every AlarmCheckInterval until done closes.
func (a *alarms) run(done <-chan struct{}) {
	a.check(true)
	t := time.NewTicker(a.srv.cfg.AlarmCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			a.check(false)
		case <-done:
			return
		}
	}
}

// check evaluates both alarms; disk space is read at most once a second
// unless forced.
func (a *alarms) check(forceDisk bool) {
	a.set(&a.memory, a.memoryHigh(), "memory")
	a.mu.Lock()
	due := forceDisk || time.Since(a.lastDiskCheck) >= diskCheckInterval
	if due {
		a.lastDiskCheck = time.Now()
	}
	a.mu.Unlock()
	if due {
		a.set(&a.disk, a.diskLow(), "disk")
	}
}

func (a *alarms) memoryHigh() bool {
	limit := a.memoryLimit.Load()
	return limit > 0 && a.srv.reg.MemoryUsed() >= limit
}

func (a *alarms) diskLow() bool {
	limit := a.diskLimit.Load()
	if limit <= 0 {
		return false
	}
	free := freeDiskBytes(a.srv.cfg.DataDir)
	return free >= 0 && free < limit
}

// checkMemory raises the memory alarm right after a publish pushed usage
// over the mark, so a burst cannot outrun the periodic check. Clearing is
// left to the monitor.
func (a *alarms) checkMemory() {
	if !a.active.Load() && a.memoryHigh() {
		a.set(&a.memory, true, "memory")
	}
}

// set changes one alarm and, when that changes whether any alarm is on,
// blocks or unblocks the publishing connections.
func (a *alarms) set(flag *bool, on bool, resource string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if *flag == on {
		return
	}
	wasActive := a.memory || a.disk
	*flag = on
	isActive := a.memory || a.disk
	if on {
		a.srv.log.Warn("resource alarm raised: blocking publishers", "resource", resource)
	} else {
		a.srv.log.Info("resource alarm cleared", "resource", resource)
	}
	switch {
	case !wasActive && isActive:
		a.released = make(chan struct{})
		a.active.Store(true)
		a.srv.eachConn(func(c *conn) {
			if c.published.Load() {
				a.notifyBlockedLocked(c)
			}
		})
	case wasActive && !isActive:
		close(a.released)
		a.released = nil
		a.active.Store(false)
		a.srv.eachConn(func(c *conn) {
			if c.blockedSent {
				c.blockedSent = false
				c.out.method(0, &amqpwire.ConnectionUnblocked{})
			}
		})
	}
}

// reasonLocked is the connection.blocked reason RabbitMQ would give.
func (a *alarms) reasonLocked() string {
	switch {
	case a.memory && a.disk:
		return "low on memory and disk"
	case a.memory:
		return "low on memory"
	default:
		return "low on disk"
	}
}

// notifyBlockedLocked tells c it is blocked, once per alarm, if it asked
// to be told. a.mu must be held.
func (a *alarms) notifyBlockedLocked(c *conn) {
	if c.blockedSent || !c.caps.blocked || !c.opened.Load() {
		return
	}
	c.blockedSent = true
	c.out.method(0, &amqpwire.ConnectionBlocked{Reason: a.reasonLocked()})
}

// blockedUntil returns nil if c may publish, or a channel closed when the
// alarms clear, after making sure c has been told it is blocked.
func (a *alarms) blockedUntil(c *conn) <-chan struct{} {
	if !a.active.Load() {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.released == nil {
		return nil
	}
	a.notifyBlockedLocked(c)
	return a.released
}

// forget drops a closing connection's alarm state.
func (a *alarms) forget(c *conn) {
	a.mu.Lock()
	c.blockedSent = false
	a.mu.Unlock()
}

// waitWhileBlocked is called by the reader before each publish: while an
// alarm is on the connection stops here, not reading its socket, which is
// how RabbitMQ pushes back on publishers.
func (c *conn) waitWhileBlocked() error {
	if !c.published.Load() {
		c.published.Store(true)
	}
	for {
		released := c.srv.alarms.blockedUntil(c)
		if released == nil {
			return nil
		}
		c.flushPublishes()
		c.readPaused.Store(true)
		select {
		case <-released:
			c.readPaused.Store(false)
		case <-c.abort:
			c.readPaused.Store(false)
			return errAborted
		case <-c.stopping:
			// Shutdown: connection.close is already queued; leave the
			// publish undone rather than hold the server up.
			c.readPaused.Store(false)
			return errAborted
		}
	}
}
