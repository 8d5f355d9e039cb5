package seglog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
	"unsafe"
)

// Why map? A writer that must see the bytes, such as crypto/tls encrypting
// a fetch response, would otherwise have them read into a buffer first: a
// copy of every byte out of the page cache before the encryption reads
// them again. Mapped, the encryption reads the page cache itself.
//
// Why keep the mapping? Mapping the chunk of one fetch and unmapping it
// after costs more than the copy it saves: entering the pages into the
// page tables and tearing them down again (BenchmarkFetchTLS, 1 MiB
// fetches, broker and client: 1.10 to 1.16 ms of CPU per MiB, against
// 1.06 to 1.07 reading into a buffer). So a segment file is mapped once,
// whole, and the mapping kept with its open descriptor in the file cache
// (handles.go): a page already read through it is read again at no cost
// but the reading (0.96 to 1.02 ms per MiB, against 1.06 to 1.21, the
// two interleaved), and a page read for the first time costs one fault
// for a run of pages, about what the copy cost (a file read once: a
// fresh mapping, 0.15 to 0.23 ms per MiB, pread 0.19 to 0.3). The
// mapping is as long as any segment can be (mapSpan),
// so the active segment's covers what is appended after it was made;
// only the pages touched take page tables, the rest is address space.
// A chunk not all in the page cache is copied instead (inPageCache).
// At most maxMappings files are mapped at once (each mapping is one of
// the process's vm.max_map_count areas, 65,530 by default); the least
// recently used one nobody reads is unmapped to make room, and a file
// that finds no room is copied instead. Unmapping happens after the file
// cache's lock is released (fileCache.unlock): tearing down the page
// tables of a 1 GiB segment read through takes milliseconds.
//
// A mapping lives while the file cache keeps the descriptor open, and the
// cache closes it only when nobody has it pinned: a reader's Slice pins
// its files, so the mapping outlives every read through it, and a
// segment that retention or compaction deletes meanwhile is still read
// whole (a mapping, like the descriptor, keeps the unlinked file's data).
// What a mapping does not survive is the file being cut shorter than the
// chunk being read (a follower truncating a diverged log): touching a
// page past the end raises SIGBUS. The write therefore runs with
// debug.SetPanicOnFault, which turns that fault into a panic of this
// goroutine alone, and the panic into errFileShrunk for this write; the
// partition and every other reader go on. (pread would have returned a
// short read instead, which copyChunk reports as io.ErrUnexpectedEOF:
// the same outcome.)

// mapSpan is how much of a file a mapping covers: any segment's length,
// as segment.bytes is a 32-bit number in Kafka. A chunk past it (in a
// segment made larger by an oversized batch) is copied.
const mapSpan = 1<<31 - 1

// errFileShrunk is what writing a mapped chunk returns when the file was
// cut shorter than the chunk while it was read (or, as rarely, a page
// evicted after inPageCache could not be read back from the disk).
var errFileShrunk = fmt.Errorf("seglog: segment file cut short (or unreadable) while being read: %w", io.ErrUnexpectedEOF)

// errNoMappingRoom is returned by fileHandle.mapping when maxMappings
// files are mapped and all are being read.
var errNoMappingRoom = errors.New("seglog: every mapping is in use")

// writeChunkMapped writes the chunk to w from the mapping of its file, in
// one Write: w must not keep the slice it is given (io.Writer's rule). If
// the file cannot be mapped, it is copied instead.
func writeChunkMapped(w io.Writer, c Chunk) (int64, error) {
	if strconv.IntSize < 64 || c.Pos+c.Len > mapSpan {
		return copyChunk(w, c) // past what a mapping covers (or can, on 32 bits)
	}
	pages, err := c.handle.mapping()
	if err != nil || !inPageCache(pages, c.Pos, c.Len) {
		return copyChunk(w, c)
	}
	n, err := writeMapped(w, pages, pages[c.Pos:c.Pos+c.Len])
	if err == nil && n < c.Len {
		err = io.ErrShortWrite
	}
	return n, err
}

// mapping returns the pinned file mapped from its start, mapSpan bytes
// long, mapping it if it is not yet.
func (h *fileHandle) mapping() ([]byte, error) {
	c := h.cache
	c.mu.Lock()
	defer c.unlock()
	if h.mapped != nil {
		c.maps.MoveToFront(h.mapElem)
		return h.mapped, nil
	}
	if c.maps.Len() >= c.mapLimit {
		c.shedMappingsLocked(c.maps.Len() - c.mapLimit + 1)
		if c.maps.Len() >= c.mapLimit {
			return nil, errNoMappingRoom
		}
	}
	rc, err := h.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var pages []byte
	var mapErr error
	if err := rc.Control(func(fd uintptr) {
		pages, mapErr = syscall.Mmap(int(fd), 0, mapSpan, syscall.PROT_READ, syscall.MAP_SHARED)
	}); err != nil {
		return nil, err
	}
	if mapErr != nil {
		return nil, os.NewSyscallError("mmap", mapErr)
	}
	h.mapped, h.mapElem = pages, c.maps.PushFront(h)
	return pages, nil
}

// unmap ends a mapping made by fileHandle.mapping.
func unmap(pages []byte) { syscall.Munmap(pages) }

// shedMappingsLocked unmaps up to n files nobody has pinned, least
// recently used first.
func (c *fileCache) shedMappingsLocked(n int) {
	for e := c.maps.Back(); e != nil && n > 0; {
		prev := e.Prev()
		if h := e.Value.(*fileHandle); h.pins == 0 {
			c.unmapLocked(h)
			n--
		}
		e = prev
	}
}

// pageSizeOS is the size of the pages a mapping is made of.
var pageSizeOS = int64(os.Getpagesize())

// inPageCache reports whether the file pages under pages[pos:pos+n] are
// all in the page cache (mincore(2)), so that reading them through the
// mapping waits for no disk. A page fault that must read the disk blocks
// its thread with the goroutine's P held, where a pread would let the
// scheduler run other goroutines meanwhile: so a chunk that is not all
// in memory is copied, which also brings it into the cache for the next
// read.
func inPageCache(pages []byte, pos, n int64) bool {
	var vec [512]byte // one byte per page: 2 MiB of 4 KiB pages per call
	from := pos &^ (pageSizeOS - 1)
	for from < pos+n {
		length := min(pos+n-from, int64(len(vec))*pageSizeOS)
		_, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&pages[from])), uintptr(length), uintptr(unsafe.Pointer(&vec[0])))
		if errno != 0 {
			return false
		}
		for _, v := range vec[:(length+pageSizeOS-1)/pageSizeOS] {
			if v&1 == 0 {
				return false
			}
		}
		from += length
	}
	return true
}

// writeMapped writes data, which lies in the mapping pages, to w, turning
// a fault on the mapping (the file was cut short) into errFileShrunk. Any
// other panic goes on.
func writeMapped(w io.Writer, pages, data []byte) (n int64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			fault, ok := r.(interface{ Addr() uintptr })
			if !ok || !within(pages, fault.Addr()) {
				panic(r)
			}
			err = errFileShrunk
		}
	}()
	written, err := w.Write(data)
	return int64(written), err
}

// within reports whether addr lies in b.
func within(b []byte, addr uintptr) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return addr >= start && addr < start+uintptr(len(b))
}
