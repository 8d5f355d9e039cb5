package seglog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// groupStats counts what cleaning one group of segments did.
type groupStats struct {
	segments     int
	records      int64
	removed      int64
	rewritten    int64
	tombstones   int64
	bytesRead    int64
	bytesWritten int64
}

// cleanResult is what compacting a group of adjacent closed segments gives:
// out (fsynced under its .cleaned names) replaces group[:replaced], and
// group[replaced:], of which nothing is left, is deleted. out is nil when
// nothing of the group is left at all, and also when the group is a single
// segment from which nothing would be removed (then replaced is 0 and
// deleted false: nothing to do).
type cleanResult struct {
	out      *cleanedSegment
	replaced int
	deleted  bool // group[replaced:] is to be deleted
}

// cleanGroup writes the compacted form of group to <base>.log.cleaned and
// its two index files, base being the group's first segment's.
//
// The sources after the last one that keeps a record are deleted rather
// than covered by out, so that out's last offset is always at or past the
// base of every segment it replaces (which is how Open completes an
// interrupted swap, see swap.go) without an empty batch to mark the end:
// several clients mishandle empty batches (segmentio/kafka-go panics on two
// in a row, as it does with Kafka's), so the only ones written are those
// keeping producers' last sequences (compact_producers.go) and this one:
// the log's first segment (logStart) is never deleted, so that compaction
// cannot move the log start offset: if nothing of it is left, an empty
// batch covering its last offset stays.
func (l *Log) cleanGroup(ctx context.Context, group []cleanSource, logStart bool, rule recordRule, producers producerLastBatches, now time.Time, cfg Config) (cleanResult, groupStats, error) {
	gs := groupStats{segments: len(group)}
	out, err := createCleaned(l.dir, group[0].view.seg.base)
	if err != nil {
		return cleanResult{}, gs, fmt.Errorf("seglog: compact: %w", err)
	}
	w := cleanWriter{out: out, bw: bufio.NewWriterSize(out.log, 1<<20), interval: int64(cfg.IndexIntervalBytes)}
	replaced := 0               // sources up to the last one that kept something
	var firstLast record.Header // the last batch of group[0]
	for k, src := range group {
		f := recordFilter{rule: rule, producers: producers, keepTombstones: now.UnixMilli()-src.maxTs <= cfg.DeleteRetentionMs, stats: &gs}
		err = src.view.forEachBatch(ctx, func(batch []byte, h record.Header) error {
			if k == 0 {
				firstLast = h
			}
			gs.bytesRead += int64(len(batch))
			kept, err := f.filter(batch, h)
			if err != nil {
				return fmt.Errorf("seglog: compact %s, batch at offset %d: %w", src.view.seg.logPath, h.BaseOffset, err)
			}
			for _, b := range kept {
				if err := w.write(b); err != nil {
					return err
				}
				replaced = k + 1
			}
			return nil
		})
		if err != nil {
			out.discard()
			return cleanResult{}, gs, err
		}
	}
	if replaced == 0 && logStart {
		err = w.write(emptyTail(firstLast, firstLast.LastOffsetDelta))
		replaced = 1
	}
	if err == nil {
		err = w.finish()
	}
	if err != nil {
		out.discard()
		return cleanResult{}, gs, fmt.Errorf("seglog: compact: write %s: %w", out.path(logSuffix), err)
	}
	gs.bytesWritten = out.size
	switch {
	case len(group) == 1 && gs.removed == 0 && gs.rewritten == 0:
		out.discard()
		return cleanResult{}, gs, nil
	case replaced == 0:
		out.discard()
		return cleanResult{deleted: true}, gs, nil
	}
	if err := crashAt("cleaned"); err != nil {
		return cleanResult{}, gs, err
	}
	return cleanResult{out: out, replaced: replaced, deleted: replaced < len(group)}, gs, nil
}

// recordRule is what decides which keyed records a pass keeps: keep if
// set (a Retainer's), else the newest record of each key.
type recordRule struct {
	latest map[string]int64 // key -> offset of its latest record in the dirty range
	keep   func(off int64, r record.Record) (record.Record, bool)
}

// recordFilter decides which records of a batch compaction keeps.
type recordFilter struct {
	rule           recordRule
	producers      producerLastBatches
	keepTombstones bool // the batch's segment is within delete.retention.ms
	stats          *groupStats
}

// filter returns the batches holding what is kept of batch: batch itself
// when every record stays, nothing when none does, else one re-encoded
// batch per run of consecutive kept offsets. Control batches and
// transactional batches (whose outcome the log does not know) are kept
// whole; empty batches (an earlier pass's placeholder) are dropped. An
// idempotent producer's last batch that loses its last record also gets an
// empty batch for the removed tail, and keeps it (compact_producers.go).
func (f *recordFilter) filter(batch []byte, h record.Header) ([][]byte, error) {
	if h.Control() || h.Transactional() && h.RecordCount > 0 {
		f.stats.records += int64(h.RecordCount)
		return [][]byte{batch}, nil
	}
	recs, err := record.Records(batch)
	if err != nil {
		return nil, err
	}
	f.stats.records += int64(len(recs))
	producersLast := f.producers.isLast(h)
	if len(recs) == 0 {
		if producersLast {
			return [][]byte{batch}, nil
		}
		return nil, nil
	}
	keep := make([]bool, len(recs))
	kept, rewritten := 0, 0
	for i, r := range recs {
		var changed bool
		if recs[i], keep[i], changed = f.keep(r, h.BaseOffset+int64(r.OffsetDelta)); keep[i] {
			kept++
			if changed {
				rewritten++
			}
		}
	}
	f.stats.removed += int64(len(recs) - kept)
	f.stats.rewritten += int64(rewritten)
	if kept == len(recs) && rewritten == 0 {
		return [][]byte{batch}, nil
	}
	var out [][]byte
	for i := 0; i < len(recs); {
		if !keep[i] {
			i++
			continue
		}
		j := i + 1
		for j < len(recs) && keep[j] {
			j++
		}
		// Records decodes record i with offset delta i, so a run of
		// indexes is a run of offsets.
		out = append(out, rebuildRun(h, int32(i), recs[i:j]))
		i = j
	}
	if tail := removedTail(keep); producersLast && tail < len(recs) {
		out = append(out, emptyTail(h, int32(tail)))
	}
	return out, nil
}

// removedTail is the index of the first of the records at the end of a
// batch that are all removed (len(keep) if the last one is kept).
func removedTail(keep []bool) int {
	i := len(keep)
	for i > 0 && !keep[i-1] {
		i--
	}
	return i
}

// keep is the compaction rule for one record at offset off: whether it
// stays, as what, and whether that is a change of it.
func (f *recordFilter) keep(r record.Record, off int64) (record.Record, bool, bool) {
	if r.Key == nil {
		return r, false, false // Kafka's cleaner drops these too; a compacted topic refuses them
	}
	out := r
	if f.rule.keep != nil {
		var ok bool
		if out, ok = f.rule.keep(off, r); !ok {
			return r, false, false
		}
	} else if latest, ok := f.rule.latest[string(r.Key)]; ok && latest > off {
		return r, false, false
	}
	if r.Value == nil && !f.keepTombstones {
		f.stats.tombstones++
		return r, false, false
	}
	return out, true, !sameRecord(out, r)
}

// sameRecord reports whether a Retainer left r as it was.
func sameRecord(a, b record.Record) bool {
	return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil) &&
		slices.EqualFunc(a.Headers, b.Headers, func(x, y record.RecordHeader) bool {
			return x.Key == y.Key && bytes.Equal(x.Value, y.Value)
		})
}

// Suffixes of the files of a compacted segment on its way in (swap.go).
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

var segmentSuffixes = []string{logSuffix, indexSuffix, timeIndexSuffix}

// cleanedSegment is a compacted group written beside the log, not yet part
// of it. Its descriptors become the new segment's when it is swapped in.
type cleanedSegment struct {
	dir     string
	base    int64
	next    int64 // offset after its last batch
	size    int64
	state   string // cleanedSuffix, then swapSuffix once committed
	log     *os.File
	idxFile *os.File
	timFile *os.File
	idx     segIndex
}

func createCleaned(dir string, base int64) (*cleanedSegment, error) {
	c := &cleanedSegment{dir: dir, base: base, next: base, state: cleanedSuffix, idx: newSegIndex()}
	files := []**os.File{&c.log, &c.idxFile, &c.timFile}
	for i, suffix := range segmentSuffixes {
		f, err := os.OpenFile(c.path(suffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			c.discard()
			return nil, err
		}
		*files[i] = f
	}
	return c, nil
}

// path is the current name of the file that will become <base><suffix>.
func (c *cleanedSegment) path(suffix string) string {
	return segmentPath(c.dir, c.base, suffix) + c.state
}

// discard closes and removes the files (under their current names).
func (c *cleanedSegment) discard() {
	for i, f := range []*os.File{c.log, c.idxFile, c.timFile} {
		if f != nil {
			f.Close()
		}
		os.Remove(c.path(segmentSuffixes[i]))
	}
}

// cleanWriter appends batches to a cleanedSegment, indexing them as appends
// to a segment would.
type cleanWriter struct {
	out      *cleanedSegment
	bw       *bufio.Writer
	interval int64
}

var errCleanedTooLarge = errors.New("seglog: compacted segment would pass 2 GiB; index positions are 32-bit")

func (w *cleanWriter) write(b []byte) error {
	h, err := peekHead(b)
	if err != nil {
		return err
	}
	if w.out.size+h.size > math.MaxInt32 {
		return errCleanedTooLarge
	}
	if _, err := w.bw.Write(b); err != nil {
		return err
	}
	w.out.idx.add(w.out.base, w.out.size, h, w.interval)
	w.out.size += h.size
	w.out.next = h.lastOffset + 1
	return nil
}

// finish flushes the data, writes both index files and fsyncs all three.
func (w *cleanWriter) finish() error {
	if err := w.bw.Flush(); err != nil {
		return err
	}
	if err := w.out.idx.rewrite(w.out.idxFile, w.out.timFile); err != nil {
		return err
	}
	if err := datasync(w.out.log); err != nil {
		return err
	}
	if err := syncFile(w.out.idxFile); err != nil {
		return err
	}
	return syncFile(w.out.timFile)
}
