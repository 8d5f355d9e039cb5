package seglog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// Log compaction (cleanup.policy=compact), as Kafka's log cleaner does it.
//
// The closed segments are split at the cleaner checkpoint (the
// cleaner-offset file): below it every segment has been compacted before
// (clean), above it none has (dirty). A pass reads the dirty segments and
// maps every key to the offset of its latest record, then rewrites every
// closed segment, clean and dirty, oldest first, in groups of adjacent
// segments that fit in segment.bytes together, keeping a record unless a
// later record has its key, it has no key, or it is a tombstone whose
// segment is older than delete.retention.ms. Offsets never change: a
// rewritten segment keeps the name of its first source segment and holds the
// same offsets minus the removed ones. Each group is swapped in on its own
// (swap.go), and the checkpoint advances once the pass is done.
//
// The active segment is never compacted, nor is any segment from the first
// one whose largest timestamp is younger than min.compaction.lag.ms. A pass
// does nothing unless the dirty bytes are at least min.cleanable.dirty.ratio
// of the compactable bytes, or the oldest dirty record is older than
// max.compaction.lag.ms.
//
// How batches are rewritten (rebatch.go): a batch that keeps all its records
// is copied byte for byte (compression included); a batch that loses some is
// re-encoded, uncompressed, as one batch per run of consecutive retained
// offsets (record batches here hold consecutive offsets; Kafka instead keeps
// one batch with gaps in its offset deltas); a batch that loses all
// disappears, and so does a segment that loses all (except the log's first,
// which keeps an empty batch so that the log start offset stays where it
// is). So a compacted log has gaps between batches and between segments;
// Read skips them. Control batches (transaction markers) are kept as they
// are. What an idempotent producer's last batch loses at its end leaves an
// empty batch carrying the producer's last sequence (compact_producers.go).

// cleanerOffsetFile holds the cleaner checkpoint: the offset below which
// every segment has been compacted at least once.
const cleanerOffsetFile = "cleaner-offset"

// CompactStats describes one Compact pass.
type CompactStats struct {
	// DirtyRatio is the share of the compactable bytes (closed segments
	// below the min.compaction.lag.ms limit) not compacted yet, when the pass
	// started.
	DirtyRatio float64
	// Cleaned reports whether the pass rewrote the log. It is false when the
	// log is not compacted, when nothing is dirty, and when the dirty ratio
	// is below min.cleanable.dirty.ratio (and max.compaction.lag.ms does not
	// force a pass).
	Cleaned bool
	// CleanedThrough is the cleaner checkpoint after the pass: every segment
	// below it has been compacted.
	CleanedThrough int64

	SegmentsRead      int   // closed segments read and rewritten
	SegmentsWritten   int   // compacted segments swapped in for them (segments left empty are deleted)
	RecordsRead       int64 // records in the segments read
	RecordsRemoved    int64 // superseded records, expired tombstones and records without a key
	RecordsRewritten  int64 // kept records a Retainer changed
	TombstonesRemoved int64 // of RecordsRemoved, tombstones past delete.retention.ms
	BytesRead         int64
	BytesWritten      int64
}

// Compact runs one compaction pass (see CompactContext) that cannot be
// cancelled.
func (l *Log) Compact(now time.Time) (CompactStats, error) {
	return l.CompactContext(context.Background(), now)
}

// CompactContext runs one compaction pass if the log's cleanup policy has
// "compact" and enough of it is dirty. now is the clock for
// min/max.compaction.lag.ms and delete.retention.ms (tests pass their own).
// Appends and reads go on during the pass; each rewritten group of segments
// is swapped in under the log lock with a few renames. Readers holding a
// Slice of a replaced segment keep reading the old file until Release.
//
// Cancelling ctx stops the pass between batches; groups already swapped in
// stay (they are correct), and the checkpoint is not advanced, so the next
// pass covers the same dirty range again. Passes are serialized.
func (l *Log) CompactContext(ctx context.Context, now time.Time) (CompactStats, error) {
	return l.CompactBelow(ctx, now, math.MaxInt64)
}

// CompactBelow is CompactContext that rewrites no segment holding offsets
// at or past limit: a replicated log compacts only what its replication
// no longer reads back entry by entry (see replica.RaftLog.Compact), as
// ApplyRetentionBelow deletes only below such a limit.
func (l *Log) CompactBelow(ctx context.Context, now time.Time, limit int64) (CompactStats, error) {
	return l.CompactRetaining(ctx, now, limit, nil)
}

// A Retainer decides what a compaction pass keeps in place of the newest
// record of each key, for a log whose reader decides which record of a key
// holds its value (the broker's metadata log, where a conditional write
// may be ignored). A pass that will rewrite the log calls it once, with
// the offset that every segment it rewrites ends at or below (all its
// compactable closed segments, clean ones included), and then calls keep
// for every record of those segments: whether the record at offset off
// stays, and the record to write in its place (r, or r changed, offset
// and timestamp kept). Records without a key, and tombstones past
// delete.retention.ms, go whatever keep says.
type Retainer func(through int64) (keep func(off int64, r record.Record) (record.Record, bool), err error)

// CompactRetaining is CompactBelow with retain, if not nil, deciding what
// stays.
func (l *Log) CompactRetaining(ctx context.Context, now time.Time, limit int64, retain Retainer) (CompactStats, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	p, err := l.planClean(now, limit)
	if err != nil || p == nil {
		return CompactStats{}, err
	}
	defer p.release()
	stats := CompactStats{DirtyRatio: p.dirtyRatio(), CleanedThrough: l.cleanerOffset}
	if !p.worthCleaning(now) {
		return stats, nil
	}

	var keys map[string]int64
	dirtyCount := len(p.srcs) - p.firstDirty // a retainer keeps its own map
	if retain == nil {
		if keys, dirtyCount, err = buildOffsetMap(ctx, p.srcs[p.firstDirty:]); err != nil {
			return stats, l.cleanError(err)
		}
	}
	cleanEnd := p.firstDirty + dirtyCount
	through := p.srcs[cleanEnd-1].view.next
	var keep func(int64, record.Record) (record.Record, bool)
	if retain != nil {
		if keep, err = retain(through); err != nil {
			return stats, err
		}
	}
	producers, err := lastProducerBatches(ctx, p.srcs, now, p.cfg.ProducerIDExpirationMs)
	if err != nil {
		return stats, l.cleanError(err)
	}
	for i, group := range groupSources(p.srcs[:cleanEnd], p.cfg.SegmentBytes) {
		res, gs, err := l.cleanGroup(ctx, group, i == 0, recordRule{latest: keys, keep: keep}, producers, now, p.cfg)
		stats.add(gs)
		if err != nil {
			return stats, l.cleanError(err)
		}
		if res.out == nil && !res.deleted {
			continue // a lone segment with nothing to remove stays as it is
		}
		if err := l.replaceGroup(group, res); err != nil {
			if errors.Is(err, errGroupGone) {
				continue // retention deleted part of the group meanwhile
			}
			return stats, l.cleanError(err)
		}
		if res.out != nil {
			stats.SegmentsWritten++
		}
	}

	// Losing this file to a crash only makes the next pass redo this one.
	if err := writeOffsetFile(l.dir, cleanerOffsetFile, through, false); err != nil {
		return stats, l.cleanError(err)
	}
	l.cleanerOffset = through
	stats.Cleaned = true
	stats.CleanedThrough = through
	return stats, nil
}

// cleanError reports a failed pass as ErrClosed if the log was closed or
// deleted under it, which is what made it fail.
func (l *Log) cleanError(err error) error {
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed && !errors.Is(err, errSimulatedCrash) {
		return ErrClosed
	}
	return err
}

func (s *CompactStats) add(g groupStats) {
	s.SegmentsRead += g.segments
	s.RecordsRead += g.records
	s.RecordsRemoved += g.removed
	s.RecordsRewritten += g.rewritten
	s.TombstonesRemoved += g.tombstones
	s.BytesRead += g.bytesRead
	s.BytesWritten += g.bytesWritten
}

// cleanSource is one closed segment a pass reads: a referenced view, and the
// largest timestamp that delete.retention.ms is measured from.
type cleanSource struct {
	view  segView
	maxTs int64
}

// cleanPlan is what a pass works on, taken under the log lock.
type cleanPlan struct {
	cfg        Config
	srcs       []cleanSource // the compactable closed segments, oldest first
	firstDirty int           // index in srcs of the first segment not compacted yet
	cleanBytes int64
	dirtyBytes int64
}

// planClean takes references on the compactable segments, none holding
// offsets at or past limit. It returns nil (and no error) for a log whose
// policy lacks "compact". Caller holds cleanMu.
func (l *Log) planClean(now time.Time, limit int64) (*cleanPlan, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, ErrClosed
	}
	if !l.cfg.Compact {
		return nil, nil
	}
	closed := l.segments[:len(l.segments)-1]
	p := &cleanPlan{cfg: l.cfg, firstDirty: -1}
	lagHorizon := now.UnixMilli() - l.cfg.MinCompactionLagMs
	for i, s := range closed {
		maxTs := s.largestTimestamp()
		if l.cfg.MinCompactionLagMs > 0 && maxTs > lagHorizon || s.next > limit {
			break // this segment and everything after it are too young, or past the limit
		}
		v, err := s.viewLocked()
		if err != nil {
			p.release()
			return nil, err
		}
		p.srcs = append(p.srcs, cleanSource{view: v, maxTs: maxTs})
		if s.next <= l.cleanerOffset {
			p.cleanBytes += s.size
			continue
		}
		if p.firstDirty < 0 {
			p.firstDirty = i
		}
		p.dirtyBytes += s.size
	}
	if p.firstDirty < 0 {
		p.firstDirty = len(p.srcs)
	}
	return p, nil
}

func (p *cleanPlan) release() {
	for _, s := range p.srcs {
		s.view.release()
	}
}

func (p *cleanPlan) dirtyRatio() float64 {
	if p.dirtyBytes == 0 {
		return 0
	}
	return float64(p.dirtyBytes) / float64(p.cleanBytes+p.dirtyBytes)
}

// worthCleaning applies min.cleanable.dirty.ratio and max.compaction.lag.ms.
func (p *cleanPlan) worthCleaning(now time.Time) bool {
	if p.dirtyBytes == 0 {
		return false
	}
	if p.dirtyRatio() >= p.cfg.MinCleanableDirtyRatio {
		return true
	}
	if p.cfg.MaxCompactionLagMs <= 0 {
		return false
	}
	// Kafka's estimate of the oldest dirty record: the first dirty batch.
	first := p.srcs[p.firstDirty].view
	h, err := newHeadReader(first.f, first.limit).at(0)
	return err == nil && h.maxTimestamp >= 0 && now.UnixMilli()-h.maxTimestamp > p.cfg.MaxCompactionLagMs
}

// groupSources splits srcs into runs of adjacent segments whose sizes add up
// to at most maxBytes (a segment larger than that is a group of its own) and
// whose offsets fit the 32-bit relative offsets of one segment's index.
func groupSources(srcs []cleanSource, maxBytes int64) [][]cleanSource {
	var groups [][]cleanSource
	for start := 0; start < len(srcs); {
		end, size := start+1, srcs[start].view.limit
		for end < len(srcs) {
			next := srcs[end].view
			if size+next.limit > maxBytes || next.next-1-srcs[start].view.seg.base > maxRelativeOffset {
				break
			}
			size += next.limit
			end++
		}
		groups = append(groups, srcs[start:end])
		start = end
	}
	return groups
}

// maxRelativeOffset is the largest offset distance from a segment's base an
// index entry can hold.
const maxRelativeOffset = 1<<32 - 1

// errSimulatedCrash is returned when a test stops a pass at a crash point.
var errSimulatedCrash = errors.New("seglog: simulated crash during compaction")

// crashPoint, when set by a test, is called at each step of a swap; if it
// returns true the pass stops right there, leaving its files as a crash
// would ("cleaned": the .cleaned files are written and fsynced; "swap": they
// have been renamed to .swap, the commit point).
var crashPoint func(step string) bool

func crashAt(step string) error {
	if crashPoint != nil && crashPoint(step) {
		return fmt.Errorf("%w at step %q", errSimulatedCrash, step)
	}
	return nil
}
