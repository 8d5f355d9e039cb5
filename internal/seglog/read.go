package seglog

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/record"
)

// Chunk is a byte range of one segment file holding whole batches.
type Chunk struct {
	File        *os.File // the segment's .log file; shared, so read it only with pread/sendfile at Pos
	Pos, Len    int64
	FirstOffset int64 // base offset of the first batch in the range

	handle *fileHandle // File's, which maps it (mapped_linux.go)
}

// Slice is what Read returns: file ranges holding whole batches in offset
// order. It holds a reference on each segment it covers, so the files stay
// open (even if retention deletes them) until Release.
type Slice struct {
	Chunks   []Chunk
	segs     []*segment
	released atomic.Bool
}

var errReleased = errors.New("seglog: slice already released")

// Len returns the number of bytes in the slice.
func (s *Slice) Len() int64 {
	var n int64
	for _, c := range s.Chunks {
		n += c.Len
	}
	return n
}

// Release drops the slice's segment references. It is safe to call twice;
// the slice must not be used afterwards.
func (s *Slice) Release() {
	if s.released.CompareAndSwap(false, true) {
		for _, seg := range s.segs {
			seg.releaseView()
		}
	}
}

// Bytes reads the slice into memory, for callers that must look inside the
// batches.
func (s *Slice) Bytes() ([]byte, error) {
	if s.released.Load() {
		return nil, errReleased
	}
	b := make([]byte, s.Len())
	at := int64(0)
	for _, c := range s.Chunks {
		if _, err := c.File.ReadAt(b[at:at+c.Len], c.Pos); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		at += c.Len
	}
	return b, nil
}

// WriteTo writes the slice to w. To a *net.TCPConn on Linux it uses
// sendfile(2) with an explicit file offset (see sendfile_linux.go); to any
// other writer it copies with pread.
func (s *Slice) WriteTo(w io.Writer) (int64, error) {
	return s.writeChunks(w, writeChunk)
}

// WriteMappedTo writes the slice to w straight from the page cache, one
// Write per chunk of memory-mapped file (see mapped_linux.go), for a
// writer that must read the bytes, such as a TLS connection encrypting
// them, and would otherwise be handed a copy. w must not keep the slices
// it is given. A chunk whose file was cut short while w read it fails the
// write with an error wrapping io.ErrUnexpectedEOF.
func (s *Slice) WriteMappedTo(w io.Writer) (int64, error) {
	return s.writeChunks(w, writeChunkMapped)
}

// writeChunks writes every chunk of the slice to w with write.
func (s *Slice) writeChunks(w io.Writer, write func(io.Writer, Chunk) (int64, error)) (int64, error) {
	if s.released.Load() {
		return 0, errReleased
	}
	var total int64
	for _, c := range s.Chunks {
		n, err := write(w, c)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// copyBufs are copyChunk's buffers: large, so that a TLS connection (when
// its files find no mapping) encrypts a chunk in few writes, and pooled,
// so that a chunk does not allocate one.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// copyChunk is the portable path: a copy from a SectionReader, which reads
// with pread and so never touches the file's shared offset.
func copyChunk(w io.Writer, c Chunk) (int64, error) {
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	n, err := io.CopyBuffer(w, io.NewSectionReader(c.File, c.Pos, c.Len), *buf)
	if err == nil && n < c.Len {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Read returns whole batches starting with the batch that contains offset
// (the client skips records below the offset it asked for, as with Kafka),
// up to maxBytes in total, but always at least one whole batch if there is
// one (KIP-74). It continues into following segments while the budget
// allows. Only bytes below the write position at the time of the call are
// returned, so a reader never sees part of a batch.
//
// In a compacted log an offset may belong to no batch any more; Read then
// starts with the first batch after it.
//
// offset < StartOffset or > EndOffset is ErrOffsetOutOfRange; offset ==
// EndOffset gives an empty Slice. Once Scrub has found a corrupt batch,
// Read returns its *CorruptionError whatever the offset. The caller must
// Release the Slice.
func (l *Log) Read(offset, maxBytes int64) (*Slice, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil, ErrClosed
	}
	if l.corrupt != nil {
		// Scrub found damage: serve nothing more of this log, not even
		// what lies before the damage, so that the partition is plainly
		// offline rather than half there.
		l.mu.RUnlock()
		return nil, l.corrupt
	}
	if offset < l.start || offset > l.end {
		l.mu.RUnlock()
		return nil, ErrOffsetOutOfRange
	}
	if offset == l.end {
		l.mu.RUnlock()
		return &Slice{}, nil
	}
	v, err := l.segments[l.segmentIndexLocked(offset)].viewLocked()
	l.mu.RUnlock()
	if err != nil {
		return nil, err
	}

	sl := &Slice{}
	budget := maxBytes
	from := offset
	for {
		sl.segs = append(sl.segs, v.seg)
		c, ok, err := v.readChunk(from, budget, len(sl.Chunks) == 0)
		if err != nil {
			sl.Release()
			return nil, err
		}
		if ok {
			sl.Chunks = append(sl.Chunks, c)
			budget -= c.Len
			if budget <= 0 || c.Pos+c.Len < v.limit {
				break // budget spent, or the next batch did not fit
			}
		} else if len(sl.Chunks) > 0 {
			break // the segment's first batch does not fit the rest of the budget
		}
		// Nothing at or after from in this segment (only possible in a
		// compacted log), or all of it fitted: go on with the next one.
		from = max(from, v.next)
		next, ok, err := l.viewContinuing(v.seg, from)
		if err != nil {
			sl.Release()
			return nil, err
		}
		if !ok {
			break
		}
		v = next
	}
	return sl, nil
}

// ReadBelow is Read without the batches whose base offset is at or past
// limit: a read_committed fetch stops at the last stable offset, a
// replica's consumers at its high watermark. It finds them by walking the
// batch headers of the slice (base offset and length).
func (l *Log) ReadBelow(offset, maxBytes, limit int64) (*Slice, error) {
	s, err := l.Read(offset, maxBytes)
	if err != nil {
		return nil, err
	}
	if err := s.cutAt(limit); err != nil {
		s.Release()
		return nil, err
	}
	return s, nil
}

// cutAt drops the batches of s whose base offset is at or past limit.
// It reads the batch headers a block at a time (cutBlock), not with a
// pread each: a replica's readers (consumers at its high watermark, a
// quorum queue's truncator) cut every read, and small batches made that
// a syscall per batch.
func (s *Slice) cutAt(limit int64) error {
	bp := cutBlocks.Get().(*[cutBlock]byte)
	defer cutBlocks.Put(bp)
	var block []byte // the bytes of the chunk from blockAt on
	var blockAt int64
	for i := range s.Chunks {
		c := &s.Chunks[i]
		block = nil
		for pos := c.Pos; pos < c.Pos+c.Len; {
			if pos < blockAt || pos+record.LogOverhead > blockAt+int64(len(block)) {
				n := max(min(cutBlock, c.Pos+c.Len-pos), record.LogOverhead)
				if _, err := c.File.ReadAt(bp[:n], pos); err != nil {
					if err == io.EOF {
						err = io.ErrUnexpectedEOF
					}
					return err
				}
				block, blockAt = bp[:n], pos
			}
			head := block[pos-blockAt:]
			if int64(binary.BigEndian.Uint64(head[:8])) >= limit {
				c.Len = pos - c.Pos
				n := i + 1
				if c.Len == 0 {
					n = i
				}
				s.Chunks = s.Chunks[:n]
				return nil
			}
			pos += record.LogOverhead + int64(binary.BigEndian.Uint32(head[8:12]))
		}
	}
	return nil
}

// cutBlock is how much of a chunk one read of cutAt takes.
const cutBlock = 16 << 10

var cutBlocks = sync.Pool{New: func() any { return new([cutBlock]byte) }}

// viewContinuing returns a view of the segment that holds offset from, read
// after prev: normally the segment after prev, but if compaction replaced
// prev (and maybe its neighbours) by one segment meanwhile, that segment,
// so that no offset is skipped.
func (l *Log) viewContinuing(prev *segment, from int64) (segView, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed || from >= l.end {
		return segView{}, false, nil
	}
	i := l.segmentIndexLocked(from)
	if l.segments[i] == prev {
		// prev is still in the log and was read to its end.
		if i++; i == len(l.segments) {
			return segView{}, false, nil
		}
	}
	v, err := l.segments[i].viewLocked()
	return v, err == nil, err
}

// readChunk finds the batch containing offset (or the first batch at or
// after it) and extends the range over whole batches within budget; with
// atLeastOne the first batch is taken even if it alone exceeds the budget.
func (v segView) readChunk(offset, budget int64, atLeastOne bool) (Chunk, bool, error) {
	r := newHeadReader(v.f, v.limit)
	start := posForOffset(v.offsets, uint32(max(offset-v.seg.base, 0)))
	start, first, err := r.batchContaining(start, offset)
	if err == io.EOF {
		return Chunk{}, false, nil
	}
	if err != nil {
		return Chunk{}, false, err
	}
	if first.size > budget {
		if !atLeastOne {
			return Chunk{}, false, nil
		}
		return Chunk{File: v.f, Pos: start, Len: first.size, FirstOffset: first.baseOffset, handle: v.seg.file}, true, nil
	}
	end := v.limit
	if start+budget < v.limit {
		// The last whole batch inside the budget: walk from the nearest
		// indexed boundary, not from the start of the range.
		from := max(boundaryAtOrBelow(v.offsets, start+budget), start+first.size)
		if end, err = r.lastBoundaryWithin(from, start+budget); err != nil {
			return Chunk{}, false, err
		}
	}
	return Chunk{File: v.f, Pos: start, Len: end - start, FirstOffset: first.baseOffset, handle: v.seg.file}, true, nil
}
