package seglog

import (
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Log is one partition's storage: a directory of segments. All methods are
// safe for concurrent use.
//
// Locking: mu guards the segment list, the offsets and every segment's
// mutable fields. Appends write under the write lock; readers take the read
// lock only to find a segment, take a reference and copy its index slices,
// then read the file without the lock. fsync never runs under mu except at
// a segment roll (rare: once per segment.bytes).
type Log struct {
	dir    string
	logger *slog.Logger

	mu       sync.RWMutex
	syncDone *sync.Cond // on &mu: broadcast whenever synced, committing or failed change

	// Guarded by mu.
	cfg        Config
	segments   []*segment // ordered by base offset; the last is the active segment; never empty while open
	start      int64      // log start offset
	end        int64      // log end offset: the next offset to assign
	closed     bool
	failed     error            // sticky: a write or fsync failed and durability of later data is unknown
	corrupt    *CorruptionError // sticky: Scrub found a bad batch; reads and appends are refused (scrub.go)
	epochs     epochIndex       // where each leader epoch begins (epochs.go)
	cuts       []int64          // the offsets of every TruncateTo so far, in order (truncate.go)
	committing bool             // a commit round is in flight (see durability.go)
	wanted     int64            // the highest offset a durable waiter has waited for, plus one
	synced     int64            // every offset below this is on stable storage, and so are the names leading to it
	syncRounds int64            // commit rounds run, for the benchmark
	syncBusy   time.Duration    // time commit rounds spent in fsync, for the benchmark
	// unsyncedDirs are directories whose fsync a new log's data needs
	// before it counts as durable: the log's own (its segment files'
	// entries) first, its parent, then the parents of the other
	// directories Open created. The first commit round, roll or Close
	// fsyncs them, so that a new log costs no fsync until it holds
	// durable data.
	unsyncedDirs []string

	// cacheKeep > 0: DropCached drops the active segment's durable pages
	// from the page cache but for the last cacheKeep bytes (DropCacheBehind).
	cacheKeep atomic.Int64
	dropMu    sync.Mutex // serializes DropCached

	direct       atomic.Bool // appends write past the page cache (WriteDirect)
	directWarned bool        // a segment's refusal of direct writes was logged (warnDirectRefusedLocked); guarded by mu

	checkpointMu   sync.Mutex // serializes writes of the recovery-point file
	checkpointed   int64      // value last written to recovery-point; guarded by checkpointMu
	lastCheckpoint time.Time  // guarded by checkpointMu

	cleanMu       sync.Mutex // serializes compaction passes (compact.go)
	cleanerOffset int64      // the cleaner checkpoint; guarded by cleanMu

	swaps atomic.Uint64 // compacted groups swapped in (Swaps); moves under mu
}

// Open opens (creating if missing) the log in dir.
//
// After a clean Close (the clean-shutdown marker exists) the files are
// trusted: only the index files are sanity-checked and the batches after the
// last index entry are walked to find the end. After an unclean stop, every
// batch from the segment holding the recovery point to the end is verified
// with record.Verify (CRC-32C) and those segments' indexes are rebuilt. A
// torn tail of the last segment is truncated with a warning; any other bad
// batch makes Open fail with a *CorruptionError and leaves the files as they
// are. logger may be nil (slog.Default is used).
func Open(dir string, cfg Config, logger *slog.Logger) (*Log, error) {
	if logger == nil {
		logger = slog.Default()
	}
	created, err := missingDirs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, logger: logger.With("log", dir), cfg: cfg.normalized()}
	l.syncDone = sync.NewCond(&l.mu)
	if err := l.load(created); err != nil {
		for _, s := range l.segments {
			s.release()
		}
		return nil, err
	}
	return l, nil
}

// SetConfig replaces the configuration; it applies to the next append,
// roll and retention pass.
func (l *Log) SetConfig(cfg Config) {
	l.mu.Lock()
	l.cfg = cfg.normalized()
	l.mu.Unlock()
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// StartOffset returns the log start offset: the first offset that can be read.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// EndOffset returns the log end offset, the offset the next record will get.
// On a single node it is also the high watermark.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end
}

// ActiveBase returns the base offset of the active segment: the offsets
// below it lie in closed segments, the only ones compaction and retention
// touch.
func (l *Log) ActiveBase() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.activeLocked().base
}

// Size returns the number of bytes in all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.sizeLocked()
}

func (l *Log) sizeLocked() int64 {
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

func (l *Log) activeLocked() *segment { return l.segments[len(l.segments)-1] }

// segmentIndexLocked returns the index of the segment that holds offset:
// the last one whose base offset is <= offset.
func (l *Log) segmentIndexLocked(offset int64) int {
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base > offset })
	return max(i-1, 0)
}

// Close makes everything durable, writes the recovery point and the
// clean-shutdown marker, and drops the log's references to its segments
// (open Slices keep theirs). Close is idempotent.
func (l *Log) Close() error {
	segs, end, err := l.shutdown(true)
	if segs == nil {
		return err
	}
	if err == nil {
		l.checkpointMu.Lock()
		if l.checkpointed != end {
			err = writeOffsetFile(l.dir, recoveryPointFile, end, false)
		}
		if err == nil {
			err = writeMarker(l.dir)
		}
		l.checkpointMu.Unlock()
	}
	for _, s := range segs {
		s.release()
	}
	return err
}

// Delete closes the log without a final sync and removes its directory
// (topic deletion). Open Slices keep reading their unlinked files.
func (l *Log) Delete() error {
	segs, _, _ := l.shutdown(false)
	l.checkpointMu.Lock()
	defer l.checkpointMu.Unlock()
	for _, s := range segs {
		s.release()
	}
	return os.RemoveAll(l.dir)
}

// shutdown marks the log closed, waits for an in-flight commit round and,
// if syncFirst, makes everything durable (syncAllLocked). It hands back the
// segments (nil if the log was already closed) for the caller to release
// once it is done with the directory.
func (l *Log) shutdown(syncFirst bool) (segs []*segment, end int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, 0, nil
	}
	l.closed = true
	for l.committing {
		l.syncDone.Wait()
	}
	if syncFirst {
		err = l.failed
		if err == nil {
			err = l.syncAllLocked()
		}
		if err == nil {
			l.synced = l.end
		} else if l.failed == nil {
			l.failed = err
		}
	}
	l.syncDone.Broadcast()
	segs, l.segments = l.segments, nil
	return segs, l.end, err
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }
