package seglog

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Open file descriptors.
//
// A broker with 10,000 partitions or durable queues has tens of thousands
// of segment files. Holding every one open would pass the process's
// open-file limit (Kafka asks operators for ulimit -n of 100,000 and more;
// RabbitMQ and LavinMQ keep a file-handle cache instead). So a segment's
// .log file is opened on demand through one process-wide fileCache, which
// keeps at most a fixed number of them open and closes the least recently
// used idle one when it needs the slot. The index files are only appended to
// at group commits and rolls and read at Open, so they are opened for each
// use and closed straight after (segment.withIndexFiles).
//
// A descriptor is closed by the cache only when nobody has it pinned (a
// reader's Slice pins the files it covers until Release, so a sendfile in
// progress or a segment deleted under a reader keeps working), and, if a
// write through it still awaits an fsync, only after the cache fsynced it:
// a write-back error must be reported to the descriptor the data went
// through. Idle files with no unsynced writes go first.
//
// A handle written direct (direct.go) holds a second descriptor, opened
// with O_DIRECT, while it is open: the cache counts it against the limit
// too and closes it with the file, so a broker following thousands of
// partitions does not hold thousands of descriptors past the limit.
//
// Every fsync of a .log file goes through its handle (syncUpTo), one at a
// time, and the first that fails is kept: from then on the handle reports
// that error to every fsync asked of it. Linux reports a write-back error
// to one fsync of a file and then forgets it, so a second fsync running
// beside the failing one, or any later one, can succeed although the pages
// it should cover are gone; only the failure itself tells the truth.

var files = newFileCache(maxOpenFilesFromLimit())

// SetMaxOpenFiles sets how many segment .log files the process keeps open
// at most (n < 1 means 1) and returns the previous value. Files readers
// hold are not closed, so the count can pass the limit while they read.
// The default is half of the open-file limit.
func SetMaxOpenFiles(n int) (previous int) {
	files.mu.Lock()
	previous, files.limit = files.limit, max(n, 1)
	files.mu.Unlock()
	files.makeRoom()
	return previous
}

// OpenFiles returns how many segment .log files are open now (a file
// opened for direct writes too counts once).
func OpenFiles() int {
	files.mu.Lock()
	defer files.mu.Unlock()
	return files.lru.Len()
}

// fileCache bounds the open descriptors of the handles it manages, and
// the mappings of their files (mapped_linux.go).
type fileCache struct {
	mu       sync.Mutex
	limit    int
	lru      list.List // of *fileHandle that are open; most recently pinned at the front
	directs  int       // how many of them hold an O_DIRECT descriptor too
	mapLimit int
	maps     list.List // of *fileHandle that are mapped; most recently read at the front
	unmapped [][]byte  // mappings dropped under mu, unmapped by unlock once it is released
}

// maxMappings bounds the files mapped at once (see mapped_linux.go).
const maxMappings = 1024

func newFileCache(limit int) *fileCache {
	return &fileCache{limit: max(limit, 1), mapLimit: maxMappings}
}

// fileHandle is a file that is open only while the cache lets it be.
type fileHandle struct {
	cache *fileCache
	path  string // the name to reopen it under

	// Guarded by cache.mu.
	f       *os.File // nil while closed
	direct  *os.File // the file opened for direct writes while f is open, or nil (direct.go)
	pins    int
	retired bool // the segment is gone: never reopen
	elem    *list.Element
	mapped  []byte // the file mapped from its start while open, or nil (mapped_linux.go)
	mapElem *list.Element

	// Write generations: written counts writes (under the owning Log's
	// lock), synced is the value of written that the last successful
	// fsync covered. They differ while a write awaits its fsync. dataEnd
	// is where the data written through the handle ends (past it a file
	// may have preallocated space), for the fsync observer.
	written atomic.Int64
	synced  atomic.Int64
	dataEnd atomic.Int64

	syncMu   sync.Mutex
	syncDone *sync.Cond // on syncMu: broadcast when an fsync ends
	syncing  bool       // guarded by syncMu: an fsync of the file is in flight
	syncErr  error      // guarded by syncMu; sticky: an fsync of the file failed
}

// errRetired is returned by pin after the segment was closed.
var errRetired = errors.New("seglog: segment file already closed")

// handle returns a handle for path, a file holding size bytes of data,
// closed until it is first pinned.
func (c *fileCache) handle(path string, size int64) *fileHandle {
	h := newFileHandle(c, path)
	h.dataEnd.Store(size)
	return h
}

// adopt returns a handle for f, a new empty file already open under path.
func (c *fileCache) adopt(path string, f *os.File) *fileHandle {
	h := newFileHandle(c, path)
	h.f = f
	c.mu.Lock()
	h.elem = c.lru.PushFront(h)
	c.mu.Unlock()
	c.makeRoom()
	return h
}

func newFileHandle(c *fileCache, path string) *fileHandle {
	h := &fileHandle{cache: c, path: path}
	h.syncDone = sync.NewCond(&h.syncMu)
	return h
}

// pin opens the file if needed and keeps it open until unpin. Opening a
// file under the cache lock serializes opens, but an open is a few
// microseconds and happens only for files that were idle.
func (h *fileHandle) pin() (*os.File, error) {
	c := h.cache
	f, opened, err := h.pinOpening()
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		// Other descriptors (connections, files with unsynced writes)
		// took the room: make some and try once more.
		c.syncAndClose(max(c.openCount()/4, 1))
		f, opened, err = h.pinOpening()
	}
	if err != nil {
		return nil, err
	}
	if opened {
		c.makeRoom()
	}
	return f, nil
}

// pinOpening is one attempt of pin; opened says it opened the file.
func (h *fileHandle) pinOpening() (f *os.File, opened bool, err error) {
	c := h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.retired {
		return nil, false, errRetired
	}
	if h.f != nil {
		h.pins++
		c.lru.MoveToFront(h.elem)
		return h.f, false, nil
	}
	if f, err = os.OpenFile(h.path, os.O_RDWR, 0); err != nil {
		return nil, false, fmt.Errorf("seglog: open %s: %w", h.path, err)
	}
	h.f = f
	h.elem = c.lru.PushFront(h)
	h.pins++
	return f, true, nil
}

// unpin ends a pin; the file may be closed from then on.
func (h *fileHandle) unpin() {
	c := h.cache
	c.mu.Lock()
	h.pins--
	c.closeIfRetiredLocked(h)
	over := c.descriptorsLocked() > c.limit
	c.unlock()
	if over {
		c.makeRoom()
	}
}

func (c *fileCache) openCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// descriptorsLocked is how many descriptors the open files hold.
func (c *fileCache) descriptorsLocked() int { return c.lru.Len() + c.directs }

// makeRoom brings the open files down to the limit: idle files first,
// then, if that is not enough, files whose only reason to stay open is a
// write awaiting its fsync, which it fsyncs and closes. So a burst of
// writes to more files than the limit (one produce request to 3,000
// partitions) costs fsyncs on the writers' path instead of running the
// process out of descriptors.
func (c *fileCache) makeRoom() {
	c.mu.Lock()
	c.evictLocked()
	excess := c.descriptorsLocked() - c.limit
	c.unlock()
	if excess > 0 {
		c.syncAndClose(excess)
	}
}

// syncAndClose closes up to n files nobody has pinned, least recently
// used first, fsyncing those with unsynced writes outside the lock.
func (c *fileCache) syncAndClose(n int) {
	type job struct {
		h            *fileHandle
		gen, dataEnd int64
	}
	var jobs []job
	c.mu.Lock()
	for e := c.lru.Back(); e != nil && len(jobs) < n; e = e.Prev() {
		if h := e.Value.(*fileHandle); h.pins == 0 {
			h.pins++ // ours until closed: nobody else closes it meanwhile
			gen, dataEnd := h.writeState()
			jobs = append(jobs, job{h, gen, dataEnd})
		}
	}
	c.mu.Unlock()
	for _, j := range jobs {
		if j.h.dirty() {
			// A failure stays with the handle, which reports it to the
			// owning log's next fsync (and so fails the log); the file
			// may then be closed like a clean one.
			j.h.syncUpTo(j.h.f, j.gen, j.dataEnd)
		}
		c.mu.Lock()
		j.h.pins--
		if j.h.idleLocked() {
			c.closeLocked(j.h)
		}
		c.closeIfRetiredLocked(j.h)
		c.unlock()
	}
}

// wrote records a write (or truncation) through the pinned file that left
// its data ending at dataEnd; until an fsync covers it, the cache keeps the
// file open.
func (h *fileHandle) wrote(dataEnd int64) {
	h.dataEnd.Store(dataEnd)
	h.written.Add(1)
}

// writeState returns the write count an fsync started now would cover and
// where the data those writes left ends.
func (h *fileHandle) writeState() (generation, dataEnd int64) {
	return h.written.Load(), h.dataEnd.Load()
}

// sync fsyncs the pinned file f unless nothing was written since the last
// successful fsync.
func (h *fileHandle) sync(f *os.File) error {
	g, dataEnd := h.writeState()
	return h.syncUpTo(f, g, dataEnd)
}

// syncUpTo makes the writes counted up to generation g, which left the data
// ending at dataEnd, durable. It waits for an fsync of the file in flight,
// then fsyncs the pinned file f unless a successful fsync already covered
// g. Once an fsync of the file failed it returns that error (see the top of
// this file). The fsync observer is told that dataEnd bytes are durable:
// no more, although writes that landed meanwhile may be covered too, so
// that what it counts durable is exactly what the caller acknowledges.
func (h *fileHandle) syncUpTo(f *os.File, g, dataEnd int64) error {
	h.syncMu.Lock()
	for h.syncing {
		h.syncDone.Wait()
	}
	if err := h.syncErr; err != nil || h.synced.Load() >= g {
		h.syncMu.Unlock()
		return err
	}
	h.syncing = true
	h.syncMu.Unlock()

	err := syncData(f, dataEnd)

	h.syncMu.Lock()
	h.syncing = false
	if err != nil {
		h.syncErr = err
	} else if g > h.synced.Load() {
		h.synced.Store(g)
	}
	h.syncDone.Broadcast()
	h.syncMu.Unlock()
	return err
}

// failed reports whether an fsync of the file failed.
func (h *fileHandle) failed() bool {
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	return h.syncErr != nil
}

// dirty reports whether a write through the file awaits an fsync.
func (h *fileHandle) dirty() bool { return h.written.Load() != h.synced.Load() }

// idleLocked reports whether the cache may close the file now: nobody
// uses it, and no write awaits an fsync through it (or its fsync failed,
// and the handle keeps the error).
func (h *fileHandle) idleLocked() bool {
	return h.pins == 0 && (!h.dirty() || h.failed())
}

// retire closes the file for good. The caller holds the last reference to
// the segment, so only the cache itself may have it pinned (syncAndClose);
// then the file is closed when that pin ends.
func (h *fileHandle) retire() {
	c := h.cache
	c.mu.Lock()
	defer c.unlock()
	h.retired = true
	c.closeIfRetiredLocked(h)
}

func (c *fileCache) closeIfRetiredLocked(h *fileHandle) {
	if h.retired && h.pins == 0 {
		c.closeLocked(h)
	}
}

// unlock releases mu, then unmaps the mappings dropped under it: tearing
// down the page tables of a large file read through its mapping can take
// milliseconds, which no pin of any other file should wait for.
func (c *fileCache) unlock() {
	dropped := c.unmapped
	c.unmapped = nil
	c.mu.Unlock()
	for _, m := range dropped {
		unmap(m)
	}
}

// unmapLocked drops the handle's mapping, if it has one, for unlock to
// unmap: nobody may be reading through it.
func (c *fileCache) unmapLocked(h *fileHandle) {
	if h.mapped == nil {
		return
	}
	c.unmapped = append(c.unmapped, h.mapped)
	h.mapped = nil
	c.maps.Remove(h.mapElem)
	h.mapElem = nil
}

func (c *fileCache) closeLocked(h *fileHandle) {
	if h.f == nil {
		return
	}
	c.unmapLocked(h)
	c.closeDirectLocked(h)
	h.f.Close() // read-only use since the last fsync, or retired: nothing to report
	h.f = nil
	c.lru.Remove(h.elem)
	h.elem = nil
}

// evictLocked closes idle files, least recently used first, until at most
// limit are open or none is idle.
func (c *fileCache) evictLocked() {
	c.shedLocked(c.descriptorsLocked() - c.limit)
}

// shedLocked closes idle files, least recently used first, until n
// descriptors are closed.
func (c *fileCache) shedLocked(n int) {
	for e := c.lru.Back(); e != nil && n > 0; {
		prev := e.Prev()
		if h := e.Value.(*fileHandle); h.idleLocked() {
			before := c.descriptorsLocked()
			c.closeLocked(h)
			n -= before - c.descriptorsLocked()
		}
		e = prev
	}
}
