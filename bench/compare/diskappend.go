package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"
)

// The disk limits of the Kafka acks=all rows append the way Wharf's log
// does (internal/seglog): one write(2) per batch to the end of a segment
// file that grows as it goes, a new file every segmentBytes (the closed one
// fdatasynced first, the directory fsynced after the new one is created),
// and an acknowledgement only once an fdatasync covers the batch. They
// differ in how writes and fdatasyncs interleave.

const (
	// segmentBytes is Wharf's default segment.bytes.
	segmentBytes = 1 << 30
	// groupCommitInFlight is how many batches the group-commit method keeps
	// written but not yet synced: franz-go's limit of produce requests in
	// flight for an idempotent (acks=all) producer.
	groupCommitInFlight = 5
)

// segmentFiles appends to numbered files in a private directory, rolling
// to a new file every segmentBytes. A closed file is removed at once (its
// data was synced), so a run holds one segment on disk.
type segmentFiles struct {
	dir    string
	seq    int
	active *os.File
	size   int64
	// direct, when not nil, is the active segment opened with O_DIRECT:
	// a follower's writes go through it, past the page cache, as
	// internal/seglog's follower logs write (WriteDirect).
	direct     *os.File
	wantDirect bool
}

// newSegmentFiles creates a directory under parent holding one empty
// segment, written past the page cache if direct.
func newSegmentFiles(parent string, direct bool) (*segmentFiles, error) {
	dir, err := os.MkdirTemp(parent, "disk-limit-*")
	if err != nil {
		return nil, err
	}
	s := &segmentFiles{dir: dir, wantDirect: direct}
	if err := s.openNext(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// openNext creates the next segment file and makes its name durable.
func (s *segmentFiles) openNext() error {
	f, err := os.OpenFile(filepath.Join(s.dir, fmt.Sprintf("%020d.log", s.seq)), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	s.seq++
	s.active, s.size = f, 0
	if s.wantDirect {
		// Where the file system refuses O_DIRECT, follower logs write
		// through the page cache, and so does this.
		s.direct, _ = openDirect(f.Name())
	}
	return syncDir(s.dir)
}

// write appends buf to the active segment: through its O_DIRECT
// descriptor when it has one (buf aligned, and every write a whole number
// of blocks, so the end stays aligned), else through the page cache.
func (s *segmentFiles) write(buf []byte) error {
	if s.direct != nil {
		_, err := s.direct.WriteAt(buf, s.size)
		return err
	}
	_, err := s.active.Write(buf)
	return err
}

// closeActive closes the active segment's descriptors.
func (s *segmentFiles) closeActive() {
	s.active.Close()
	if s.direct != nil {
		s.direct.Close()
		s.direct = nil
	}
}

// full reports whether appending n bytes would overflow the active segment.
func (s *segmentFiles) full(n int) bool { return s.size > 0 && s.size+int64(n) > segmentBytes }

// roll fdatasyncs and removes the active segment and starts the next. The
// caller makes sure no fdatasync of the active file is in flight.
func (s *segmentFiles) roll() error {
	old := s.active
	if err := datasync(old); err != nil {
		return err
	}
	s.closeActive()
	os.Remove(old.Name())
	return s.openNext()
}

// close closes the active segment and removes the directory.
func (s *segmentFiles) close() {
	s.closeActive()
	os.RemoveAll(s.dir)
}

// syncDir fsyncs a directory, so the files created in it survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// newAppendRun creates the segment files of one disk-limit run under the
// suite's directory (written past the page cache if direct) and a chunk
// of random bytes to append, aligned for O_DIRECT.
func (s *suite) newAppendRun(chunk int, direct bool) (*segmentFiles, []byte, error) {
	segs, err := newSegmentFiles(s.work, direct)
	if err != nil {
		return nil, nil, err
	}
	buf := alignedBuffer(chunk)
	rand.Read(buf)
	return segs, buf, nil
}

// directBlock is the alignment O_DIRECT wants of a buffer's address: the
// page size, as internal/seglog aligns its direct writes.
const directBlock = 4096

// alignedBuffer returns n bytes starting at a directBlock boundary.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directBlock)
	skip := (directBlock - int(uintptr(unsafe.Pointer(&b[0]))%directBlock)) % directBlock
	return b[skip : skip+n : skip+n]
}

// runDiskSync appends chunk-sized writes, each followed by its own
// fdatasync before the next is written, until the window ends, and reports
// MB/s ("mbps") and fdatasyncs per second ("ops"): a writer that makes each
// batch durable on its own.
func (s *suite) runDiskSync(ctx context.Context, chunk int) (figures, error) {
	segs, buf, err := s.newAppendRun(chunk, false)
	if err != nil {
		return nil, err
	}
	defer segs.close()
	w := s.newWindow()
	var ops int64
	for now := time.Now(); now.Before(w.end) && ctx.Err() == nil; now = time.Now() {
		if segs.full(chunk) {
			if err := segs.roll(); err != nil {
				return nil, err
			}
		}
		if err := segs.write(buf); err != nil {
			return nil, err
		}
		segs.size += int64(chunk)
		if err := datasync(segs.active); err != nil {
			return nil, err
		}
		if w.contains(time.Now()) {
			ops++
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rate := float64(ops) / w.seconds()
	return figures{"ops": rate, "mbps": rate * float64(chunk) / 1e6}, nil
}

// groupCommit is the state shared by runDiskGroupCommit's writer and
// syncer, guarded by mu.
type groupCommit struct {
	mu      sync.Mutex
	changed sync.Cond // broadcast whenever written, synced, syncing, stop or err change
	written int64     // bytes appended
	synced  int64     // bytes covered by a finished fdatasync
	syncing bool      // an fdatasync of the active segment is in flight
	stop    bool
	err     error
	// acked counts the bytes whose fdatasync finished inside the window.
	acked int64
	w     window
}

// advanceLocked records that every byte below to is durable.
func (g *groupCommit) advanceLocked(to int64) {
	if to > g.synced {
		if g.w.contains(time.Now()) {
			g.acked += to - g.synced
		}
		g.synced = to
	}
	g.changed.Broadcast()
}

func (g *groupCommit) failLocked(err error) {
	if g.err == nil {
		g.err = err
	}
	g.changed.Broadcast()
}

// runDiskGroupCommit appends chunk-sized writes the way Wharf's log serves
// a pipelined acks=all producer: the writer keeps up to
// groupCommitInFlight batches written but not yet durable, and a syncer
// runs rounds, each one fdatasync covering everything written when it
// started, while the writer goes on appending. It reports MB/s made
// durable inside the window ("mbps") and rounds per second ("ops").
func (s *suite) runDiskGroupCommit(ctx context.Context, chunk int) (figures, error) {
	return s.runDiskGroupCommitWriters(ctx, chunk, 1)
}

// runDiskGroupCommitWriters runs writers group-commit appenders at once in
// one window, each on segment files of its own with its own fdatasyncs, as
// the replicas of a cluster on one machine append to one disk: all but the
// first write past the page cache (O_DIRECT) and drop what they cached
// followerCacheBehind behind what they synced, as a partition's followers
// do (internal/seglog WriteDirect, DropCacheBehind), so the ceiling pays
// the page cache what the replicas pay. It reports their sum:
// MB/s made durable inside the window ("mbps") and rounds per second
// ("ops").
func (s *suite) runDiskGroupCommitWriters(ctx context.Context, chunk, writers int) (figures, error) {
	w := s.newWindow()
	results := make([]groupCommitResult, writers)
	var wg sync.WaitGroup
	for i := range results {
		keepCache := i == 0 // the leader's: consumers read it
		wg.Go(func() { results[i] = s.groupCommitAppends(ctx, w, chunk, keepCache) })
	}
	wg.Wait()
	f := figures{"mbps": 0, "ops": 0}
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		f["mbps"] += float64(r.acked) / w.seconds() / 1e6
		f["ops"] += float64(r.rounds) / w.seconds()
	}
	return f, nil
}

// groupCommitResult is what one group-commit appender made durable inside
// its window: bytes and fdatasync rounds, or the error that stopped it.
type groupCommitResult struct {
	acked, rounds int64
	err           error
}

// followerCacheBehind is how far behind its synced end a follower's log
// keeps its page cache (internal/seglog's follower setting).
const followerCacheBehind = 32 << 20

// groupCommitAppends is one group-commit appender (runDiskGroupCommit) on
// segment files of its own, until w ends; unless keepCache, it drops the
// pages of its active segment followerCacheBehind behind each round, and
// writes past the page cache.
func (s *suite) groupCommitAppends(ctx context.Context, w window, chunk int, keepCache bool) groupCommitResult {
	segs, buf, err := s.newAppendRun(chunk, !keepCache)
	if err != nil {
		return groupCommitResult{err: err}
	}
	defer segs.close()
	g := &groupCommit{w: w}
	g.changed.L = &g.mu

	var rounds int64
	syncerDone := make(chan struct{})
	go func() {
		defer close(syncerDone)
		g.mu.Lock()
		defer g.mu.Unlock()
		for {
			for g.written == g.synced && !g.stop && g.err == nil {
				g.changed.Wait()
			}
			if g.stop || g.err != nil {
				return
			}
			target, f, size := g.written, segs.active, segs.size
			g.syncing = true
			g.mu.Unlock()
			err := datasync(f)
			if err == nil && !keepCache && size > followerCacheBehind {
				err = dropPagesBefore(f, size-followerCacheBehind)
			}
			g.mu.Lock()
			g.syncing = false
			if err != nil {
				g.failLocked(err)
				return
			}
			if g.w.contains(time.Now()) {
				rounds++
			}
			g.advanceLocked(target)
		}
	}()

	writeErr := g.appendUntil(ctx, segs, buf)
	g.mu.Lock()
	g.stop = true
	g.changed.Broadcast()
	g.mu.Unlock()
	<-syncerDone
	switch {
	case writeErr != nil:
		return groupCommitResult{err: writeErr}
	case ctx.Err() != nil:
		return groupCommitResult{err: ctx.Err()}
	case g.err != nil:
		return groupCommitResult{err: g.err}
	}
	return groupCommitResult{acked: g.acked, rounds: rounds}
}

// appendUntil is the writer of runDiskGroupCommit: it appends buf until the
// window ends, waiting while groupCommitInFlight batches are unsynced, and
// rolls segments between rounds.
func (g *groupCommit) appendUntil(ctx context.Context, segs *segmentFiles, buf []byte) error {
	limit := int64(groupCommitInFlight * len(buf))
	for time.Now().Before(g.w.end) && ctx.Err() == nil {
		g.mu.Lock()
		for g.written-g.synced >= limit && g.err == nil {
			g.changed.Wait()
		}
		if g.err != nil {
			g.mu.Unlock()
			return nil // the syncer's error is reported
		}
		if segs.full(len(buf)) {
			// As a log roll does: the closed segment is synced before the
			// next is created, with no round in flight on it.
			for g.syncing {
				g.changed.Wait()
			}
			if err := segs.roll(); err != nil {
				g.mu.Unlock()
				return err
			}
			g.advanceLocked(g.written)
		}
		g.mu.Unlock()

		if err := segs.write(buf); err != nil {
			return err
		}
		g.mu.Lock()
		segs.size += int64(len(buf))
		g.written += int64(len(buf))
		g.changed.Broadcast()
		g.mu.Unlock()
	}
	return nil
}
