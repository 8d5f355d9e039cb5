package seglog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Direct writes: a log nobody reads while it is written (a Raft follower's)
// can write past the page cache with O_DIRECT. Copying every appended byte
// into the page cache is the largest single cost of a replicated write: on
// the 2-core VM the benchmarks run on, perf put half of each node's CPU
// under RF3 acks=all in the kernel's copy into page-cache folios
// (copy_folio_from_iter_atomic), two thirds of it for follower writes
// whose pages nobody reads back (DropCacheBehind drops them). A direct
// write moves the bytes to the disk from an aligned buffer instead.
//
// O_DIRECT wants offsets, lengths and buffer addresses aligned to the
// disk's logical block, so a write starts at the block boundary below the
// segment's size and repeats the bytes already written there (the tail,
// kept in memory for the next write), and ends with zeros up to the next
// boundary. The zeros lie in preallocated space, past the data, where the
// file holds zeros anyway; the repeated bytes are the same bytes, so a
// torn write leaves the durable prefix as it was. Durability is unchanged:
// the write reaches the disk but not necessarily past its cache, and the
// commit round's fdatasync (through the page-cache descriptor: it flushes
// the file, whichever descriptor wrote) makes it durable and acknowledged
// as before. Reads stay on the page-cache descriptor; the kernel drops
// cached pages a direct write overlaps, so they read what was written.
//
// The O_DIRECT descriptor belongs to the segment's file handle
// (handles.go): the file cache counts it against its limit and closes it
// with the file. The tail stays with the segment, and is forgotten
// whenever the size moves other than by a direct write.

// directBlock is the alignment of direct writes: 4 KiB, which no logical
// block size of a disk Wharf runs on exceeds.
const directBlock = 4096

// directChunk is the size of one direct write's aligned buffer; a larger
// append is written in several.
const directChunk = 1 << 20

// directBuffers holds aligned buffers of directChunk bytes, shared by every
// log: a follower's append borrows one for its writes, so the memory does
// not grow with the number of partitions.
var directBuffers = sync.Pool{New: func() any { return alignedBuffer(directChunk) }}

// alignedBuffer returns n bytes starting at a directBlock boundary.
func alignedBuffer(n int) *[]byte {
	b := make([]byte, n+directBlock)
	skip := (directBlock - int(uintptr(unsafe.Pointer(&b[0]))%directBlock)) % directBlock
	b = b[skip : skip+n : skip+n]
	return &b
}

// WriteDirect sets whether appends write past the page cache (see the top
// of this file). For a log nobody reads while it is written: a Raft
// follower's. Where the file system refuses O_DIRECT the log writes through
// the page cache as before.
func (l *Log) WriteDirect(on bool) { l.direct.Store(on) }

// alignUp rounds n up to a directBlock boundary.
func alignUp(n int64) int64 { return (n + directBlock - 1) &^ (directBlock - 1) }

// writeDirectLocked writes the parts (size bytes together) at the
// segment's write position through its O_DIRECT descriptor (the file
// handle's, opened on first use). It reports false when the file cannot
// be opened for direct writes or refuses them (directFailed), keeping
// why in directRefused; the caller then writes through the page cache,
// for the rest of the segment's life: a file system that refuses O_DIRECT
// refuses it every time (a transient failure such as EMFILE costs the
// segment its direct writes too, no more). Caller holds mu; f is the
// segment's pinned page-cache descriptor.
func (seg *segment) writeDirectLocked(f *os.File, parts [][]byte) (bool, error) {
	if seg.directRefused != nil {
		return false, nil
	}
	d, err := seg.file.directFile()
	if err != nil {
		seg.directRefused = err
		return false, nil
	}
	if err := seg.loadTail(f); err != nil {
		return true, err
	}
	bufp := directBuffers.Get().(*[]byte)
	defer directBuffers.Put(bufp)
	buf := *bufp
	at := seg.size - int64(len(seg.tail))
	n := copy(buf, seg.tail)
	// Known again once written; a failed write leaves it unknown, as the
	// caller cuts the file back.
	seg.tail, seg.tailKnown = seg.tail[:0], false
	for _, p := range parts {
		for len(p) > 0 {
			c := copy(buf[n:], p)
			n, p = n+c, p[c:]
			if n < len(buf) {
				continue
			}
			if err := writeFull(d, buf, at); err != nil {
				return seg.directFailed(err)
			}
			at, n = at+int64(n), 0
		}
	}
	if n > 0 {
		padded := int(alignUp(int64(n)))
		clear(buf[n:padded])
		if err := writeFull(d, buf[:padded], at); err != nil {
			return seg.directFailed(err)
		}
	}
	seg.tail = append(seg.tail, buf[n&^(directBlock-1):n]...)
	seg.tailKnown = true
	return true, nil
}

// warnDirectRefusedLocked logs, once in the log's life, that a segment of
// a log writing direct writes through the page cache: nothing fails, the
// node only spends the CPU direct writes save (and evicts what readers
// use), so without it an operator sees a slower node and no reason. Once
// per log, not per segment: a file system that refuses one segment
// refuses the next. Caller holds mu.
func (l *Log) warnDirectRefusedLocked(seg *segment) {
	if l.directWarned || errors.Is(seg.directRefused, errDirectUnsupported) {
		return // said once; or not a Linux system, where it is expected
	}
	l.directWarned = true
	l.logger.Warn("writes past the page cache (O_DIRECT) refused; this log writes through the page cache, at a cost in CPU",
		"file", seg.logPath, "err", seg.directRefused)
}

// errDirectUnsupported is openDirect's refusal where direct writes are not
// implemented (not Linux): expected there, so not warned of.
var errDirectUnsupported = errors.New("seglog: direct writes need Linux")

// directFailed handles a direct write's failure. EINVAL is how O_DIRECT
// refuses an alignment: a file system whose blocks are larger than
// directBlock, or one that accepts O_DIRECT at open but not for writes.
// The segment then writes through the page cache, this write too, which
// writes again with the same bytes whatever of it went direct already.
// Any other error is the write's.
func (seg *segment) directFailed(err error) (bool, error) {
	if !errors.Is(err, syscall.EINVAL) {
		return true, err
	}
	seg.directRefused = err
	seg.file.closeDirect()
	return false, nil
}

// loadTail reads the bytes between the block boundary below size and size
// back from the file when they are not in memory: at the first direct
// write to the segment, and after a cut.
func (seg *segment) loadTail(f *os.File) error {
	if seg.tailKnown {
		return nil
	}
	from := seg.size &^ (directBlock - 1)
	seg.tail = append(seg.tail[:0], make([]byte, seg.size-from)...)
	if _, err := f.ReadAt(seg.tail, from); err != nil {
		return fmt.Errorf("seglog: read the tail block of %s: %w", seg.logPath, err)
	}
	seg.tailKnown = true
	return nil
}

// writeFull writes b at off, a short write being an error: a direct write
// cannot be continued from an unaligned point.
func writeFull(f *os.File, b []byte, off int64) error {
	n, err := f.WriteAt(b, off)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// forgetTail drops the tail kept for direct writes: the segment's size
// moved other than by a direct write.
func (seg *segment) forgetTail() { seg.tailKnown = false }

// directFile returns the file opened for direct writes, opening it first
// if needed. The handle must be pinned: the descriptor is closed with the
// file (closeLocked), which the cache may do as soon as it is unpinned.
func (h *fileHandle) directFile() (*os.File, error) {
	c := h.cache
	c.mu.Lock()
	if d := h.direct; d != nil {
		c.mu.Unlock()
		return d, nil
	}
	d, err := openDirect(h.path)
	if err == nil {
		h.direct = d
		c.directs++
	}
	over := c.descriptorsLocked() > c.limit
	c.unlock()
	if over {
		c.makeRoom()
	}
	return d, err
}

// endDirect ends the segment's direct writes for good (a roll): it
// closes the O_DIRECT descriptor and drops the tail kept.
func (seg *segment) endDirect() {
	seg.file.closeDirect()
	seg.tail, seg.tailKnown = nil, false
}

// closeDirect closes the file's O_DIRECT descriptor, if open.
func (h *fileHandle) closeDirect() {
	h.cache.mu.Lock()
	h.cache.closeDirectLocked(h)
	h.cache.unlock()
}

func (c *fileCache) closeDirectLocked(h *fileHandle) {
	if h.direct != nil {
		h.direct.Close() // nothing buffered: every write went to the disk
		h.direct = nil
		c.directs--
	}
}
