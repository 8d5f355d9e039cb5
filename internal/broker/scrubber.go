package broker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// The scrubber: a background read of every partition's log that verifies
// each batch's CRC-32C (replica.Log.Scrub). Recovery at start-up trusts a
// cleanly closed log, and after a crash everything below the recovery
// point, without reading it (as Kafka does); a byte flipped there would be
// served until a client's CRC check tripped on it. The scrubber runs right
// after start-up over exactly that data, then, if Config.ScrubInterval is
// set, over every whole log at that interval. A corrupt batch takes its
// partition offline for good (until the broker restarts): Produce, Fetch
// and ListOffsets get a storage error and Metadata reports it offline, as
// for corruption found at start-up. One partition at a time, at most
// Config.ScrubBytesPerSecond, so clients keep the disk.
//
// Until the scrubber reaches a damaged batch, that batch can be served; the
// window after start-up is about (bytes before it) / ScrubBytesPerSecond.
//
// The internal topics (__consumer_offsets, __transaction_state) are topics
// and scrubbed as such. The metadata log is verified in full at Open (its
// replay checks every batch's CRC) and again by every periodic scrub;
// damage found there
// makes it refuse appends, so topic and queue changes fail with a storage
// error until the broker is restarted on a repaired copy.

// startScrubber starts the scrubber goroutine, unless ScrubInterval is
// negative. It belongs to the broker: it ends when b.stop is closed (a scrub
// in progress is cancelled between two reads) and Close waits for it
// through b.bg.
func (b *Broker) startScrubber() {
	if b.cfg.ScrubInterval < 0 {
		return
	}
	b.bg.Add(1)
	go b.scrubLoop(b.cfg.ScrubInterval)
}

func (b *Broker) scrubLoop(every time.Duration) {
	defer b.bg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Owned by this loop: ends when the broker stops or the loop returns.
	go func() {
		select {
		case <-b.stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	b.scrubAll(ctx, false)
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
			b.scrubAll(ctx, true)
		}
	}
}

// scrubAll scrubs every online partition, one after another; with full, the
// whole of each log and then the metadata log, else only what each
// partition's recovery did not verify. A
// partition whose scrub fails for another reason than corruption (an I/O
// error) stays online and is logged.
func (b *Broker) scrubAll(ctx context.Context, full bool) {
	start := time.Now()
	var total replica.ScrubStats
	offline := 0
	for _, t := range b.Topics() {
		for _, p := range t.Partitions() {
			if ctx.Err() != nil {
				return
			}
			if p.log == nil || p.Offline() != nil {
				continue // no replica here (a cluster's), or offline
			}
			st, err := p.log.Scrub(ctx, replica.ScrubOptions{Full: full, BytesPerSecond: b.cfg.ScrubBytesPerSecond})
			total.Segments += st.Segments
			total.Bytes += st.Bytes
			var corrupt *replica.CorruptionError
			switch {
			case errors.As(err, &corrupt):
				offline++
				b.logger.Error("partition offline", "topic", t.name, "partition", p.index, "err", err)
			case errors.Is(err, replica.ErrClosed), ctx.Err() != nil:
				// Deleted meanwhile, or the broker is stopping.
			case err != nil:
				b.logger.Error("scrub failed", "topic", t.name, "partition", p.index, "err", err)
			}
		}
	}
	if full {
		st, err := b.meta.log.Scrub(ctx, replica.ScrubOptions{Full: true, BytesPerSecond: b.cfg.ScrubBytesPerSecond})
		total.Segments += st.Segments
		total.Bytes += st.Bytes
		var corrupt *replica.CorruptionError
		if errors.As(err, &corrupt) {
			b.logger.Error("metadata log corrupt: topic and queue changes are refused", "err", err)
		} else if err != nil && ctx.Err() == nil {
			b.logger.Error("scrub of the metadata log failed", "err", err)
		}
	}
	level := slog.LevelInfo
	if total.Segments == 0 {
		level = slog.LevelDebug
	}
	b.logger.Log(ctx, level, "scrub done", "full", full, "segments", total.Segments, "bytes", total.Bytes,
		"partitions_taken_offline", offline, "took", time.Since(start).Round(time.Millisecond))
}
