package seglog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// File name suffixes of a segment.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

// segment is one <base>.log file with its two index files.
//
// Lifetime: the Log holds one reference while the segment is part of it and
// every view (and so every Slice) holds one too, with the .log file pinned
// open (handles.go). Deleting a segment unlinks its files at once and drops
// the Log's reference; a reader in the middle of a sendfile keeps reading
// the unlinked file through its pinned descriptor, which is closed when the
// last reference goes.
type segment struct {
	base    int64
	logPath string
	file    *fileHandle // the .log file: batches, read with pread, written with pwrite
	refs    atomic.Int32

	// Guarded by Log.mu. Bytes below size never change once written.
	size      int64     // write position: every byte below it belongs to a whole batch
	allocated int64     // the file's length as the log made it: size plus preallocated zeros
	next      int64     // offset after the last batch (= base when empty)
	idx       segIndex  // sparse indexes
	rollTime  time.Time // when the segment started taking data, for segment.ms

	durableEnd int64 // where the data the last commit round made durable ends

	// uncachedTo is where the pages of the .log file that DropCached
	// dropped from the page cache end. Guarded by Log.dropMu.
	uncachedTo int64

	// Direct writes (direct.go), while the log writes direct; the
	// O_DIRECT descriptor is file's. Guarded by Log.mu.
	directRefused error  // why direct writes were refused (nil: they were not): write through the page cache
	tail          []byte // the bytes from the block boundary below size to size
	tailKnown     bool   // tail holds them

	truncated      bool // Open cut off a torn tail of this segment (recover.go)
	verifiedAtOpen bool // Open verified every batch of it, so Scrub can skip it (scrub.go)
}

func segmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// createSegment creates the files of a new, empty segment. The .log file must
// not exist yet: a name clash means the log's bookkeeping is wrong, and
// truncating an existing file could destroy data.
func createSegment(dir string, base int64) (*segment, error) {
	s := &segment{base: base, next: base, logPath: segmentPath(dir, base, logSuffix), idx: newSegIndex()}
	f, err := os.OpenFile(s.logPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	if err := s.withIndexFiles(os.O_TRUNC, func(_, _ *os.File) error { return nil }); err != nil {
		f.Close()
		return nil, err
	}
	s.file = files.adopt(s.logPath, f)
	s.refs.Store(1)
	return s, nil
}

// openSegment describes an existing segment; its .log file is opened when
// first used. size is the file's length; the caller decides how much of it
// to trust.
func openSegment(dir string, base int64) (*segment, error) {
	s := &segment{base: base, next: base, logPath: segmentPath(dir, base, logSuffix), idx: newSegIndex()}
	fi, err := os.Stat(s.logPath)
	if err != nil {
		return nil, err
	}
	s.size = fi.Size()
	s.allocated = s.size
	s.file = files.handle(s.logPath, s.size)
	s.refs.Store(1)
	return s, nil
}

// withIndexFiles opens the two index files (creating missing ones), runs fn
// on them and closes them again.
func (s *segment) withIndexFiles(extraFlag int, fn func(idxFile, timFile *os.File) error) error {
	stem := strings.TrimSuffix(s.logPath, logSuffix)
	flags := os.O_RDWR | os.O_CREATE | extraFlag
	idxFile, err := os.OpenFile(stem+indexSuffix, flags, 0o644)
	if err != nil {
		return err
	}
	defer idxFile.Close()
	timFile, err := os.OpenFile(stem+timeIndexSuffix, flags, 0o644)
	if err != nil {
		return err
	}
	defer timFile.Close()
	// Written entries are fsynced (or not needed after a crash) before the
	// close, so a close error has nothing left to report.
	return fn(idxFile, timFile)
}

// flushIndex appends the pending index entries to the index files, opening
// them only when there are some.
func (s *segment) flushIndex() error {
	if !s.idx.pending() {
		return nil
	}
	return s.withIndexFiles(0, s.idx.flush)
}

// rewriteIndex replaces the index files' contents with the in-memory
// entries (not fsynced: syncAll does that).
func (s *segment) rewriteIndex() error {
	return s.withIndexFiles(0, s.idx.rewrite)
}

func syncIndexFiles(idxFile, timFile *os.File) error {
	if err := syncFile(idxFile); err != nil {
		return err
	}
	return syncFile(timFile)
}

// Preallocation.
//
// Appending to a file changes its size, so each fdatasync after an append
// must also commit that metadata: a journal commit on ext4 or XFS, on top
// of the data write. The active segment is therefore extended ahead of its
// data with allocated, zero-filled space (fallocate), and writes go into
// that space: their fdatasync commits no size change. (Measured on ext4 on
// a shared virtual disk, writes interleaved op by op: a write + fdatasync
// of 1 to 64 KiB took 10 to 45% less time than an append; from 256 KiB on,
// the same. Writing into fallocated blocks still converts them from
// "unwritten", which is metadata too; zero-filling the space with real
// writes would save that as well, at the price of writing every byte
// twice.) The log keeps its own end (size); the file's length (allocated)
// runs ahead of it by as much as the segment already holds, between
// minPreallocation and maxPreallocation, never past segment.bytes. The
// unused space is cut off when the segment stops being active (roll,
// Close), so closed segments, Size and disk usage hold only batches. After
// a crash the zeros past the last batch read as the end of the log
// (recover.go), never as data.
const (
	minPreallocation = 64 << 10
	maxPreallocation = 4 << 20
)

// preallocationEnd is the length to give a segment whose next write ends
// at end.
func preallocationEnd(end, segmentBytes int64) int64 {
	ahead := min(max(end, minPreallocation), maxPreallocation)
	return max(end, min(end+ahead, segmentBytes))
}

// preallocate extends the pinned file f to length to. Where the file
// system cannot (or is out of space, which the write then reports), writes
// simply extend the file; part of the range may have been allocated
// anyway, so the range counts as allocated either way and is trimmed
// later all the same.
func (s *segment) preallocate(f *os.File, to int64) {
	_ = fallocate(f, s.allocated, to-s.allocated)
	s.allocated = to
}

// trimPreallocation cuts the file back to its data. The cut counts as a
// write: the next fsync (syncAll) makes it durable.
func (s *segment) trimPreallocation() error {
	if s.allocated <= s.size {
		return nil
	}
	f, err := s.file.pin()
	if err != nil {
		return err
	}
	defer s.file.unpin()
	if err := f.Truncate(s.size); err != nil {
		return err
	}
	s.file.wrote(s.size)
	s.allocated = s.size
	return nil
}

func (s *segment) acquire() { s.refs.Add(1) }

// release drops one reference; the last one closes the file for good.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.file.retire()
	}
}

// removeFiles unlinks the segment's three files (pinned descriptors keep
// working until released). The names come from logPath: a compacted
// segment's files were created under temporary names and renamed.
func (s *segment) removeFiles() error {
	var errs []error
	stem := strings.TrimSuffix(s.logPath, logSuffix)
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := os.Remove(stem + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncAll writes the pending index entries and makes the segment's data and
// index files durable.
// Files with nothing unsynced are skipped, so closing an idle log costs
// no fsync here.
func (s *segment) syncAll() error {
	if s.file.dirty() {
		f, err := s.file.pin()
		if err != nil {
			return err
		}
		err = s.file.sync(f)
		s.file.unpin()
		if err != nil {
			return err
		}
	}
	if !s.idx.pending() && !s.idx.unsynced {
		return nil
	}
	return s.withIndexFiles(0, func(idxFile, timFile *os.File) error {
		if err := s.idx.flush(idxFile, timFile); err != nil {
			return err
		}
		if err := syncIndexFiles(idxFile, timFile); err != nil {
			return err
		}
		s.idx.unsynced = false
		return nil
	})
}

// largestTimestamp is what retention.ms compares with: the largest batch
// timestamp, or the file's modification time when no batch has one.
func (s *segment) largestTimestamp() int64 {
	if s.idx.maxTs >= 0 {
		return s.idx.maxTs
	}
	if fi, err := os.Stat(s.logPath); err == nil {
		return fi.ModTime().UnixMilli()
	}
	return -1
}

// segView is what a reader copies under Log.mu to work on a segment without
// the lock: the committed size and the index entries known at that moment.
type segView struct {
	seg     *segment
	f       *os.File // the segment's .log file, pinned open until release
	limit   int64
	next    int64 // the offset after the segment's last batch below limit
	offsets []offsetEntry
	times   []timeEntry
}

// viewLocked takes a reference, pins the file open and takes a consistent
// snapshot. Caller holds Log.mu. The view must be released.
func (s *segment) viewLocked() (segView, error) {
	f, err := s.file.pin()
	if err != nil {
		return segView{}, err
	}
	s.acquire()
	return segView{seg: s, f: f, limit: s.size, next: s.next, offsets: s.idx.offsets, times: s.idx.times}, nil
}

// release ends the view.
func (v segView) release() { v.seg.releaseView() }

// releaseView unpins the file and drops the view's reference.
func (s *segment) releaseView() {
	s.file.unpin()
	s.release()
}

// discardSegments unlinks the files of segments already taken out of the
// log and drops the log's references to them. An unlink failure is
// reported, but the segments are gone from the log either way (a file left
// behind is dealt with by the next Open).
func discardSegments(segs []*segment) error {
	var errs []error
	for _, s := range segs {
		if err := s.removeFiles(); err != nil {
			errs = append(errs, fmt.Errorf("seglog: delete segment: %w", err))
		}
		s.release()
	}
	return errors.Join(errs...)
}
