package queuestore

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"syscall"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// The scrubber: a background read of every open store's logs (messages
// and settlements) that verifies each batch's CRC-32C, as the broker's
// scrubber does for partitions (replica.Log.Scrub). A queue log reopened
// after a clean stop is trusted without being read, and after a crash
// everything below its recovery point; a byte flipped there would
// otherwise be found only when a consumer reached it. The scrubber runs
// right after Start over exactly that data, then, with
// Config.ScrubInterval, over whole logs at that interval, one log at a
// time, at most Config.ScrubBytesPerSecond. A damaged log crashes its
// queue (Owner.Crash).

// scrubber is the Root's scrub goroutine.
type scrubber struct {
	r      *Root
	cancel context.CancelFunc
	done   chan struct{}
}

// startScrubber starts the scrub goroutine, unless ScrubInterval is
// negative (then stop does nothing).
func (r *Root) startScrubber() *scrubber {
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
	s.r.Scrub(ctx, false)
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
			s.r.Scrub(ctx, true)
		}
	}
}

// Scrub scrubs the logs of every open store, one after another; with full,
// the whole of each log, else only what its recovery did not verify. A
// store whose log is damaged has its queue crashed (Owner.Crash); one
// whose scrub fails otherwise (an I/O error) stays in service and is
// logged. The scrubber goroutine calls it; tests may too.
func (r *Root) Scrub(ctx context.Context, full bool) {
	start := time.Now()
	var total replica.ScrubStats
	crashed := 0
	opts := replica.ScrubOptions{Full: full, BytesPerSecond: max(r.cfg.ScrubBytesPerSecond, 0)}
	for _, s := range r.openStores() {
		for _, l := range s.scrubbable() {
			if ctx.Err() != nil {
				return
			}
			st, err := l.Scrub(ctx, opts)
			total.Segments += st.Segments
			total.Bytes += st.Bytes
			var corrupt *replica.CorruptionError
			switch {
			case errors.As(err, &corrupt):
				crashed++
				s.crash(err)
			case errors.Is(err, replica.ErrClosed), ctx.Err() != nil:
				// Deleted or crashed meanwhile, or the root is closing.
			case err != nil:
				s.logger.Error("queuestore: scrub queue log failed", "dir", l.Dir(), "err", err)
			}
			if s.isClosed() {
				break
			}
		}
	}
	level := slog.LevelInfo
	if total.Segments == 0 {
		level = slog.LevelDebug
	}
	r.logger.Log(ctx, level, "queuestore: scrub of queue logs done", "full", full, "segments", total.Segments,
		"bytes", total.Bytes, "queues_crashed", crashed, "took", time.Since(start).Round(time.Millisecond))
}

// scrubbable returns the logs of the store that exist, none once it is
// closed.
func (s *Store) scrubbable() []*replica.Local {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	var out []*replica.Local
	for _, l := range []*replica.Local{s.messages.Load(), s.settled} {
		if l != nil {
			out = append(out, l)
		}
	}
	return out
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// IsDamage reports whether a failed read of a queue's log means the data
// is damaged, rather than a passing failure of the file system (no
// descriptor left, an I/O error) or a log closed meanwhile.
func IsDamage(err error) bool {
	var corrupt *replica.CorruptionError
	if errors.As(err, &corrupt) {
		return true
	}
	var pathErr *fs.PathError
	var errno syscall.Errno
	return err != nil && !errors.As(err, &pathErr) && !errors.As(err, &errno) && !errors.Is(err, replica.ErrClosed)
}
