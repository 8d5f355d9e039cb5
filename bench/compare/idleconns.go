package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The idle-connections workload opens many client connections, each
// through its protocol's handshake, leaves them idle and measures what the
// server pays for holding them: memory, file descriptors and the CPU it
// spends on them while nothing is asked of it (heartbeats, timers).

const (
	idleHold    = 10 * time.Second // how long the connections sit idle
	idleDialers = 16               // connections opened in parallel
)

// idleConn is one client connection the workload holds open.
type idleConn interface {
	alive() bool // the server has not closed it
	close()
}

// idleDialer opens one connection and completes its handshake.
type idleDialer func(ctx context.Context) (idleConn, error)

// idleResult is one server's figures and, when it would not take all n
// connections, why (the figures are then per connection opened).
type idleResult struct {
	f       figures
	refused error
	err     error
}

// holdIdle opens n connections with dial to the server whose process is
// pid, idleDialers at a time, holds them idle for idleHold and reports:
// "rss0"/"files0" before, "rss1"/"files1" right after opening, "rss"/
// "files" at the end of the hold, "perconn" KiB and "fdsper" per connection
// opened, "idlecpu" cores busy during the hold, "open" seconds to open
// them, "opened" and "alive" (still open at the end) counts. Opening stops
// at the first refusal; the connections opened by then are measured.
func (s *suite) holdIdle(ctx context.Context, pid, n int, dial idleDialer) idleResult {
	out, err := sizeOf(pid, "0")
	if err != nil {
		return idleResult{err: err}
	}
	start := time.Now()
	conns, refused := openIdle(ctx, n, dial)
	defer closeIdle(conns)
	if err := ctx.Err(); err != nil {
		return idleResult{err: err}
	}
	if len(conns) == 0 {
		return idleResult{err: fmt.Errorf("no connection opened: %w", refused)}
	}
	if refused != nil {
		refused = fmt.Errorf("%s of %s connections opened, then: %w", formatCount(float64(len(conns))), formatCount(float64(n)), refused)
		s.logf("   %v", refused)
	}
	out["open"] = time.Since(start).Seconds()
	opened, err := sizeOf(pid, "1")
	if err != nil {
		return idleResult{err: err}
	}
	cpu0, err := processCPUSeconds(pid)
	if err != nil {
		return idleResult{err: err}
	}
	holdStart := time.Now()
	if err := sleepUntil(ctx, holdStart.Add(idleHold)); err != nil {
		return idleResult{err: err}
	}
	cpu1, err := processCPUSeconds(pid)
	if err != nil {
		return idleResult{err: err}
	}
	out["idlecpu"] = (cpu1 - cpu0) / time.Since(holdStart).Seconds()
	end, err := sizeOf(pid, "")
	if err != nil {
		return idleResult{err: err}
	}
	for _, f := range []figures{opened, end} {
		for k, v := range f {
			out[k] = v
		}
	}
	count := float64(len(conns))
	out["opened"] = count
	out["perconn"] = (out["rss"] - out["rss0"]) * 1024 / count
	out["fdsper"] = (out["files"] - out["files0"]) / count
	out["alive"] = float64(countAlive(conns))
	return idleResult{f: out, refused: refused}
}

// openIdle opens up to n connections, idleDialers at a time, and stops at
// the first error, returning the connections opened and that error.
func openIdle(ctx context.Context, n int, dial idleDialer) ([]idleConn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		mu       sync.Mutex
		conns    = make([]idleConn, 0, n)
		firstErr errOnce
		wg       sync.WaitGroup
	)
	for range min(idleDialers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && next.Add(1) <= int64(n) {
				c, err := dial(ctx)
				if err != nil {
					if ctx.Err() == nil {
						firstErr.set(err)
					}
					cancel()
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return conns, firstErr.get()
}

// countAlive counts the connections the server has not closed,
// idleDialers at a time.
func countAlive(conns []idleConn) int {
	var alive atomic.Int64
	forEachParallel(conns, func(c idleConn) {
		if c.alive() {
			alive.Add(1)
		}
	})
	return int(alive.Load())
}

// closeIdle closes every connection, idleDialers at a time (an AMQP close
// waits for the server's close-ok).
func closeIdle(conns []idleConn) {
	forEachParallel(conns, idleConn.close)
}

// forEachParallel calls fn on every connection from idleDialers
// goroutines and returns when all calls have.
func forEachParallel(conns []idleConn, fn func(idleConn)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(idleDialers, len(conns)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(conns)); i = next.Add(1) - 1 {
				fn(conns[i])
			}
		}()
	}
	wg.Wait()
}

// amqpIdleConn is an amqp091-go connection with one channel open.
type amqpIdleConn struct {
	conn *amqp.Connection
	ch   *amqp.Channel
}

// amqpIdleDialer dials url with amqp091-go's defaults (heartbeat 10 s) and
// opens one channel.
func amqpIdleDialer(url string) idleDialer {
	return func(ctx context.Context) (idleConn, error) {
		conn, err := amqp.Dial(url)
		if err != nil {
			return nil, err
		}
		ch, err := conn.Channel()
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("open channel: %w", err)
		}
		return &amqpIdleConn{conn: conn, ch: ch}, nil
	}
}

func (a *amqpIdleConn) alive() bool { return !a.conn.IsClosed() && !a.ch.IsClosed() }

func (a *amqpIdleConn) close() { a.conn.Close() }

// kafkaIdleDialer opens bare Kafka connections that send ApiVersions and
// Metadata.
func kafkaIdleDialer(addr string) idleDialer {
	return func(ctx context.Context) (idleConn, error) {
		return dialKafkaHandshake(ctx, addr)
	}
}
