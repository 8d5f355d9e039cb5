package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// The log cleaner: compaction of topics whose cleanup.policy has "compact",
// the internal __consumer_offsets and __transaction_state among them. The
// work itself is replica.Log.Compact; this is only the loop that runs it
// over every such partition this node holds a replica of, one at a time,
// as Kafka's cleaner thread does (log.cleaner.threads=1). In a cluster
// every replica compacts its own log, leader or follower, as in Kafka
// (replica.RaftLog.Compact says what of it a pass may touch).

// logCleanerBackoff is log.cleaner.backoff.ms: the pause between two rounds
// of the cleaner over every compacted partition. A round finds most
// partitions below min.cleanable.dirty.ratio and costs little for them. Not
// a broker.Config field yet.
const logCleanerBackoff = 15 * time.Second

// startCleaner starts the cleaner goroutine. It belongs to the broker: it
// ends when b.stop is closed (a pass in progress is cancelled between
// batches) and Close waits for it through b.bg.
func (b *Broker) startCleaner() {
	b.bg.Add(1)
	go b.cleanerLoop(logCleanerBackoff)
}

func (b *Broker) cleanerLoop(every time.Duration) {
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
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if err := b.compactAll(ctx, now); err != nil && ctx.Err() == nil {
				b.logger.Error("log cleaner", "err", err)
			}
		}
	}
}

// CompactNow runs one round of the log cleaner at once, over every partition
// of every topic with "compact" in cleanup.policy, and returns the failures.
// Tests and tools use it; the broker also runs rounds every
// log.cleaner.backoff.ms.
func (b *Broker) CompactNow() error {
	return b.compactAll(context.Background(), time.Now())
}

// compactAll runs one compaction pass over the metadata log and one per
// compacted partition. A log that fails does not stop the others.
func (b *Broker) compactAll(ctx context.Context, now time.Time) error {
	var errs []error
	if err := b.compactMetadata(ctx, now); err != nil {
		errs = append(errs, err)
	}
	for _, t := range b.Topics() {
		if !t.currentConfig().compact() {
			continue
		}
		for _, p := range t.Partitions() {
			if ctx.Err() != nil {
				return errors.Join(append(errs, ctx.Err())...)
			}
			if p.log == nil || p.Offline() != nil {
				continue // no replica here, or offline
			}
			st, err := p.log.Compact(ctx, now)
			switch {
			case errors.Is(err, replica.ErrClosed):
				// The topic was deleted meanwhile.
			case err != nil:
				errs = append(errs, fmt.Errorf("compact %s-%d: %w", t.name, p.index, err))
			case st.Cleaned:
				b.logger.Debug("compacted partition", "topic", t.name, "partition", p.index,
					"segments", st.SegmentsRead, "records_removed", st.RecordsRemoved,
					"bytes_before", st.BytesRead, "bytes_after", st.BytesWritten)
			}
		}
	}
	return errors.Join(errs...)
}

// compactMetadata runs one compaction pass over the metadata log, when its
// config asks for one (metadataLogConfig; a log whose config does not is
// left as it is): a single node's keeps the newest record of each key, a
// cluster's what apply decided (metadata_origins.go).
func (b *Broker) compactMetadata(ctx context.Context, now time.Time) error {
	var st replica.CompactStats
	var err error
	if b.meta.raft != nil {
		st, err = b.compactClusterMetadata(ctx, now)
	} else {
		st, err = b.meta.log.Compact(ctx, now)
	}
	switch {
	case errors.Is(err, replica.ErrClosed):
		// The broker is closing.
	case err != nil:
		return fmt.Errorf("compact %s: %w", metadataLogName, err)
	case st.Cleaned:
		b.logger.Info("compacted the metadata log", "segments", st.SegmentsRead,
			"records_removed", st.RecordsRemoved, "records_rewritten", st.RecordsRewritten, "bytes_before", st.BytesRead, "bytes_after", st.BytesWritten)
	}
	return nil
}
