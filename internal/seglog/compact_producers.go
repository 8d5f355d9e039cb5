package seglog

import (
	"context"
	"fmt"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// Idempotent producers across compaction, as Kafka's log cleaner keeps them.
//
// A broker rebuilds its idempotent-producer table (each producer's epoch
// and last sequence) by replaying the log: after a restart without a
// producer snapshot, and on every replica that becomes leader. So a pass
// must not lose the header of each producer's last data batch. That batch's
// records are filtered like any other's, but when its last record goes, an
// empty batch covering the removed tail takes its place, carrying the
// producer id, epoch and the sequence of the tail's first offset: the log
// still ends the producer's history at its last sequence, and when no
// record of the batch is left, the empty batch is the original header (base
// offset, base and last sequence) exactly, which also lets a retry of that
// batch be recognized as a duplicate. Kafka keeps one batch with gaps
// between its offsets, emptied if need be; batches here hold consecutive
// offsets, so the kept records are separate runs and the empty batch covers
// only the removed tail. Such an empty batch stays through later passes
// while it is its producer's last batch.
//
// A producer whose last batch's largest timestamp is older than
// producer.id.expiration.ms is expired, as Kafka expires it (by the batch
// timestamps, not the append time), and its batches are compacted as any
// other's. Control batches and transactional batches are kept whole anyway
// (clean.go).

// producerLastBatches maps a producer id to the base offset of its last
// idempotent data batch in the log range a pass reads.
type producerLastBatches map[int64]int64

// isLast reports whether h is the last batch of an unexpired idempotent
// producer.
func (m producerLastBatches) isLast(h record.Header) bool {
	base, ok := m[h.ProducerID]
	return ok && base == h.BaseOffset && idempotentData(h)
}

// idempotentData reports whether h is a data batch written by an
// idempotent producer (the broker's own transactional writes carry a
// producer id but no sequence).
func idempotentData(h record.Header) bool {
	return !h.Control() && h.ProducerID >= 0 && h.BaseSequence >= 0
}

// lastProducerBatches walks the batch headers of srcs (all of a pass's
// compactable segments, oldest first) and returns each unexpired
// producer's last batch. A producer that wrote again in a segment the pass
// does not read keeps one more batch than it needs: harmless.
func lastProducerBatches(ctx context.Context, srcs []cleanSource, now time.Time, expirationMs int64) (producerLastBatches, error) {
	type lastBatch struct{ base, maxTs int64 }
	last := map[int64]lastBatch{}
	for _, src := range srcs {
		r := newHeadReader(src.view.f, src.view.limit)
		for pos := int64(0); pos < src.view.limit; {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			h, err := r.header(pos)
			if err != nil {
				return nil, &CorruptionError{File: src.view.seg.logPath, Pos: pos, Err: fmt.Errorf("reading producer ids: %w", err)}
			}
			if idempotentData(h) {
				last[h.ProducerID] = lastBatch{base: h.BaseOffset, maxTs: h.MaxTimestamp}
			}
			pos += int64(h.Size())
		}
	}
	m := producerLastBatches{}
	for id, b := range last {
		if now.UnixMilli()-b.maxTs < expirationMs {
			m[id] = b.base
		}
	}
	return m, nil
}
