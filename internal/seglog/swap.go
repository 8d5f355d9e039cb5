package seglog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Swapping a compacted group in, and finishing or undoing an interrupted
// swap at Open. This follows Kafka's protocol:
//
//  1. The group is written to <base>.log.cleaned, <base>.index.cleaned and
//     <base>.timeindex.cleaned, and fsynced. A crash now leaves .cleaned
//     files, which Open deletes: the old segments are intact.
//  2. The three are renamed to .swap, the .log last, and the directory is
//     fsynced. <base>.log.swap existing is the commit: from here Open
//     completes the swap.
//  3. Under the log lock: the old segments' index files and their .log files
//     other than <base>.log are unlinked and the directory fsynced (so that
//     no old segment can reappear once the swap files are gone); then the
//     .swap files are renamed over the final names, the .log last (which
//     atomically replaces the group's first old .log), and the in-memory
//     segment list is updated.
//
// The compacted segment replaces the group's segments up to the last one
// that keeps a record, so its last offset is at or past each of their base
// offsets; the segments after that one had nothing left and are simply
// deleted in step 3 (a crash may leave some of them: they then hold only
// superseded records, harmless, and the next pass removes them again). A
// group with nothing left at all is deleted without any new file.
//
// Open, for each <base>.log.swap: reads its last offset, deletes every
// segment file whose base lies in [base, last] (those are the group's old
// segments, or index files that will be rebuilt), renames the .swap files
// into place, and deletes .swap index files that have no .log.swap (an
// interrupted step 2).

// errGroupGone means retention or DeleteBefore removed a segment of the
// group while it was being compacted; the compacted copy is dropped.
var errGroupGone = errors.New("seglog: compacted segments were deleted meanwhile")

// replaceGroup commits res.out (if any) and puts it in the place of the
// group's first res.replaced segments, deleting the rest of the group if
// res.deleted.
func (l *Log) replaceGroup(group []cleanSource, res cleanResult) error {
	out := res.out
	if out != nil {
		if err := out.rename(swapSuffix); err != nil {
			out.discard()
			return err
		}
		if err := syncDir(l.dir); err != nil {
			out.discard()
			return err
		}
		if err := crashAt("swap"); err != nil {
			return err
		}
	}

	l.mu.Lock()
	i, ok := l.groupIndexLocked(group)
	if l.closed || !ok {
		closed := l.closed
		l.mu.Unlock()
		if out != nil {
			out.discard()
		}
		if closed {
			return ErrClosed
		}
		return errGroupGone
	}
	var seg *segment
	err := l.unlinkGroupLocked(group, res.replaced)
	if err == nil && out != nil {
		seg, err = out.install()
	}
	if err != nil {
		l.mu.Unlock()
		// Whatever was done on disk, the next Open finishes it (a committed
		// swap) or finds superseded segments to compact again. Until then
		// the old segments keep serving from their open descriptors.
		return fmt.Errorf("seglog: compact: replace segments from %d: %w", group[0].view.seg.base, err)
	}
	old := l.segments[i : i+len(group)]
	segs := make([]*segment, 0, len(l.segments))
	segs = append(segs, l.segments[:i]...)
	if seg != nil {
		segs = append(segs, seg)
	}
	segs = append(segs, l.segments[i+len(group):]...)
	l.segments = segs
	l.swaps.Add(1)
	l.mu.Unlock()

	// Readers holding Slices of the old segments keep reading the old files.
	// The first one's names may now belong to the new segment, so never
	// removeFiles them.
	for _, s := range old {
		s.release()
	}
	if out == nil {
		return nil // unlinkGroupLocked synced the directory
	}
	return syncDir(l.dir)
}

// Swaps counts the compacted groups swapped into the log since it opened.
// A reader that reads the log in several calls and must see one version
// of it, a replay from its start or a whole copy, compares the count
// before its first read and after its last: the same count means that no
// pass changed what it read between two calls. Without that, it may read
// a key's record before a swap and not its tombstone after, when one pass
// drops both (tombstones go by their segment's age, not by the record
// they delete).
func (l *Log) Swaps() uint64 { return l.swaps.Load() }

// groupIndexLocked returns where the group's segments are in the log, if
// they all still are, adjacent and closed.
func (l *Log) groupIndexLocked(group []cleanSource) (int, bool) {
	first := group[0].view.seg
	i := l.segmentIndexLocked(first.base)
	if l.segments[i] != first || i+len(group) >= len(l.segments) {
		return 0, false
	}
	for k, src := range group {
		if l.segments[i+k] != src.view.seg {
			return 0, false
		}
	}
	return i, true
}

// unlinkGroupLocked is the first part of step 3 on disk: it unlinks the
// files of the group's segments except the first one's .log when a
// compacted segment replaces the first `replaced` of them (its rename
// replaces that file), and fsyncs the directory, so that no old segment can
// come back once the .swap files are renamed away.
func (l *Log) unlinkGroupLocked(group []cleanSource, replaced int) error {
	for k, src := range group {
		for _, suffix := range segmentSuffixes {
			if k == 0 && replaced > 0 && suffix == logSuffix {
				continue
			}
			if err := removeIfExists(segmentPath(l.dir, src.view.seg.base, suffix)); err != nil {
				return err
			}
		}
	}
	return syncDir(l.dir)
}

// install renames the committed files to their final names (step 3's
// second part) and returns them as a segment of the log.
func (c *cleanedSegment) install() (*segment, error) {
	if err := c.rename(""); err != nil {
		return nil, err
	}
	// The index files were fsynced by finish and are not needed open.
	c.idxFile.Close()
	c.timFile.Close()
	logPath := segmentPath(c.dir, c.base, logSuffix)
	s := &segment{
		base:    c.base,
		logPath: logPath,
		file:    files.adopt(logPath, c.log),
		size:    c.size,
		next:    c.next,
		idx:     c.idx,
	}
	s.refs.Store(1)
	return s, nil
}

// rename moves the three files to the state suffix ("" for the final
// names), index files first so that the .log file's rename is the step
// that counts.
func (c *cleanedSegment) rename(state string) error {
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, logSuffix} {
		to := segmentPath(c.dir, c.base, suffix) + state
		if err := os.Rename(c.path(suffix), to); err != nil {
			return err
		}
	}
	c.state = state
	return nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// recoverCleanerFiles runs at Open before the segments are listed: it
// deletes what an interrupted compaction left before its commit and
// completes the swaps it had committed (see the protocol above).
func (l *Log) recoverCleanerFiles() error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var logBases, swapBases []int64
	var leftovers []string
	for _, e := range entries {
		name := e.Name()
		if base, ok := parseSegmentName(name, logSuffix); ok {
			logBases = append(logBases, base)
		}
		if base, ok := parseSegmentName(name, logSuffix+swapSuffix); ok {
			swapBases = append(swapBases, base)
		}
		if strings.HasSuffix(name, cleanedSuffix) {
			leftovers = append(leftovers, name)
		}
	}
	for _, name := range leftovers {
		l.logger.Info("removing unfinished compaction output", "file", name)
		if err := removeIfExists(filepath.Join(l.dir, name)); err != nil {
			return err
		}
	}
	for _, base := range swapBases {
		if err := l.completeSwap(base, logBases); err != nil {
			return err
		}
	}
	// .swap index files without a .log.swap: step 2 was interrupted.
	entries, err = os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), swapSuffix) {
			if err := removeIfExists(filepath.Join(l.dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if len(leftovers) == 0 && len(swapBases) == 0 {
		return nil
	}
	return syncDir(l.dir)
}

// completeSwap finishes the committed swap of <base>.log.swap.
func (l *Log) completeSwap(base int64, logBases []int64) error {
	swapPath := segmentPath(l.dir, base, logSuffix) + swapSuffix
	last, err := lastOffsetInFile(swapPath)
	if err != nil {
		return err
	}
	l.logger.Info("completing interrupted compaction swap", "file", swapPath, "last_offset", last)
	for _, b := range logBases {
		if b < base || b > last {
			continue
		}
		for _, suffix := range segmentSuffixes {
			if b == base && suffix == logSuffix {
				continue // replaced by the rename below
			}
			if err := removeIfExists(segmentPath(l.dir, b, suffix)); err != nil {
				return err
			}
		}
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, logSuffix} {
		final := segmentPath(l.dir, base, suffix)
		if err := os.Rename(final+swapSuffix, final); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// lastOffsetInFile walks the batch headers of a segment file to the last
// offset it covers.
func lastOffsetInFile(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	r := newHeadReader(f, fi.Size())
	last := int64(-1)
	for pos := int64(0); pos < fi.Size(); {
		h, err := r.at(pos)
		if err != nil {
			return 0, &CorruptionError{File: path, Pos: pos, Err: err}
		}
		last = h.lastOffset
		pos += h.size
	}
	if last < 0 {
		return 0, &CorruptionError{File: path, Pos: 0, Err: fmt.Errorf("compacted segment swap file is empty")}
	}
	return last, nil
}
