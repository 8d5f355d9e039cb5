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
// every Slice holds one per segment it reads. Deleting a segment unlinks its
// files at once and drops the Log's reference; the descriptors are closed
// when the last reference goes, so a reader in the middle of a sendfile keeps
// reading the (unlinked) file.
type segment struct {
	base    int64
	logPath string
	log     *os.File // batches; read with pread, written with pwrite
	idxFile *os.File
	timFile *os.File
	refs    atomic.Int32

	// Guarded by Log.mu. Bytes below size never change once written.
	size     int64     // write position: every byte below it belongs to a whole batch
	next     int64     // offset after the last batch (= base when empty)
	idx      segIndex  // sparse indexes
	rollTime time.Time // when the segment started taking data, for segment.ms

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
	var err error
	if s.log, err = os.OpenFile(s.logPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		return nil, err
	}
	if err = s.openIndexFiles(dir, os.O_TRUNC); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.refs.Store(1)
	return s, nil
}

// openSegment opens the files of an existing segment (creating missing index
// files). size is the .log file's length; the caller decides how much of it
// to trust.
func openSegment(dir string, base int64) (*segment, error) {
	s := &segment{base: base, next: base, logPath: segmentPath(dir, base, logSuffix), idx: newSegIndex()}
	var err error
	if s.log, err = os.OpenFile(s.logPath, os.O_RDWR, 0); err != nil {
		return nil, err
	}
	fi, err := s.log.Stat()
	if err != nil {
		s.closeFiles()
		return nil, err
	}
	s.size = fi.Size()
	if err = s.openIndexFiles(dir, 0); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.refs.Store(1)
	return s, nil
}

func (s *segment) openIndexFiles(dir string, extraFlag int) error {
	var err error
	flags := os.O_RDWR | os.O_CREATE | extraFlag
	if s.idxFile, err = os.OpenFile(segmentPath(dir, s.base, indexSuffix), flags, 0o644); err != nil {
		return err
	}
	s.timFile, err = os.OpenFile(segmentPath(dir, s.base, timeIndexSuffix), flags, 0o644)
	return err
}

func (s *segment) acquire() { s.refs.Add(1) }

// release drops one reference; the last one closes the files.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.closeFiles()
	}
}

func (s *segment) closeFiles() {
	for _, f := range []*os.File{s.log, s.idxFile, s.timFile} {
		if f != nil {
			f.Close()
		}
	}
}

// removeFiles unlinks the segment's three files (open descriptors keep
// working until released). The names come from logPath, not from the
// descriptors: a compacted segment's files were opened under temporary names.
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

// syncAll makes the segment's data and index files durable.
func (s *segment) syncAll() error {
	if err := datasync(s.log); err != nil {
		return err
	}
	if err := syncFile(s.idxFile); err != nil {
		return err
	}
	return syncFile(s.timFile)
}

// largestTimestamp is what retention.ms compares with: the largest batch
// timestamp, or the file's modification time when no batch has one.
func (s *segment) largestTimestamp() int64 {
	if s.idx.maxTs >= 0 {
		return s.idx.maxTs
	}
	if fi, err := s.log.Stat(); err == nil {
		return fi.ModTime().UnixMilli()
	}
	return -1
}

// segView is what a reader copies under Log.mu to work on a segment without
// the lock: the committed size and the index entries known at that moment.
type segView struct {
	seg     *segment
	limit   int64
	next    int64 // the offset after the segment's last batch below limit
	offsets []offsetEntry
	times   []timeEntry
}

// viewLocked takes a reference and a consistent snapshot. Caller holds Log.mu.
func (s *segment) viewLocked() segView {
	s.acquire()
	return segView{seg: s, limit: s.size, next: s.next, offsets: s.idx.offsets, times: s.idx.times}
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
