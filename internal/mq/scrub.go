package mq

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/wharf-mq/wharf/internal/seglog"
)

// The queue scrubber: a background read of every durable queue's logs
// (messages and settlements) that verifies each batch's CRC-32C, as the
// broker's scrubber does for partitions (seglog.Log.Scrub). A queue log
// reopened after a clean stop is trusted without being read, and after a
// crash everything below its recovery point; a byte flipped there would
// otherwise be found only when a consumer reached it. The scrubber runs
// right after Open over exactly that data, then, with
// Config.ScrubInterval, over whole logs at that interval, one log at a
// time, at most Config.ScrubBytesPerSecond. A damaged log crashes its
// queue (crash.go).

// scrubber is the Registry's scrub goroutine.
type scrubber struct {
	r      *Registry
	cancel context.CancelFunc
	done   chan struct{}
}

// startScrubber starts the scrub goroutine, unless ScrubInterval is
// negative (then stop does nothing).
func (r *Registry) startScrubber() *scrubber {
	ctx, cancel := context.WithCancel(context.Background())
	s := &scrubber{r: r, cancel: cancel, done: make(chan struct{})}
	if r.cfg.ScrubInterval < 0 {
		close(s.done)
		return s
	}
	go s.run(ctx, r.cfg.ScrubInterval)
	return s
}

// stop cancels a scrub in progress and waits for the goroutine.
func (s *scrubber) stop() {
	s.cancel()
	<-s.done
}

func (s *scrubber) run(ctx context.Context, every time.Duration) {
	defer close(s.done)
	s.r.scrubQueues(ctx, false)
	if every == 0 {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.r.scrubQueues(ctx, true)
		}
	}
}

// scrubQueues scrubs the logs of every durable queue in service, one after
// another; with full, the whole of each log, else only what its recovery
// did not verify. A queue whose log is damaged crashes; one whose scrub
// fails otherwise (an I/O error) stays in service and is logged.
func (r *Registry) scrubQueues(ctx context.Context, full bool) {
	start := time.Now()
	var total seglog.ScrubStats
	crashed := 0
	opts := seglog.ScrubOptions{Full: full, BytesPerSecond: max(r.cfg.ScrubBytesPerSecond, 0)}
	for _, q := range r.durableQueues() {
		for _, l := range q.store.scrubbable() {
			if ctx.Err() != nil {
				return
			}
			st, err := l.Scrub(ctx, opts)
			total.Segments += st.Segments
			total.Bytes += st.Bytes
			var corrupt *seglog.CorruptionError
			switch {
			case errors.As(err, &corrupt):
				crashed++
				q.crash(err)
			case errors.Is(err, seglog.ErrClosed), ctx.Err() != nil:
				// Deleted or crashed meanwhile, or the registry is closing.
			case err != nil:
				r.logger.Error("mq: scrub queue log failed", "queue", q.name, "vhost", q.vh.name, "dir", l.Dir(), "err", err)
			}
			if q.crashed.Load() {
				break
			}
		}
	}
	level := slog.LevelInfo
	if total.Segments == 0 {
		level = slog.LevelDebug
	}
	r.logger.Log(ctx, level, "mq: scrub of queue logs done", "full", full, "segments", total.Segments,
		"bytes", total.Bytes, "queues_crashed", crashed, "took", time.Since(start).Round(time.Millisecond))
}

// scrubbable returns the logs of the store that exist, none once it is
// closed.
func (s *queueStore) scrubbable() []*seglog.Log {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	var out []*seglog.Log
	for _, l := range []*seglog.Log{s.messages.Load(), s.settled} {
		if l != nil {
			out = append(out, l)
		}
	}
	return out
}
