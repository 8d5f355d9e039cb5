package seglog

import (
	"fmt"
	"io"
	"os"

	"github.com/wharf-mq/wharf/internal/record"
)

// headWindow is how much headReader reads at a time: about one index
// interval, the typical distance it walks from an index entry.
const headWindow = 4096

// headReader walks batch headers of a segment file below limit with pread,
// reading a window at a time so small batches cost one syscall per window.
// It is safe to use concurrently with appends because bytes below limit
// never change.
type headReader struct {
	f      *os.File
	limit  int64
	buf    []byte
	bufPos int64 // file position of buf[0]
}

func newHeadReader(f *os.File, limit int64) *headReader {
	return &headReader{f: f, limit: limit, bufPos: -1}
}

// at returns the header of the batch starting at pos. The whole batch must
// lie below limit.
func (r *headReader) at(pos int64) (batchHead, error) {
	h, err := r.header(pos)
	if err != nil {
		return batchHead{}, err
	}
	return headOf(h), nil
}

// header is at returning the whole decoded header (no CRC check).
func (r *headReader) header(pos int64) (record.Header, error) {
	if pos+record.HeaderSize > r.limit {
		return record.Header{}, fmt.Errorf("%w: %d bytes left at position %d", record.ErrShort, r.limit-pos, pos)
	}
	if r.bufPos < 0 || pos < r.bufPos || pos+record.HeaderSize > r.bufPos+int64(len(r.buf)) {
		if err := r.fill(pos); err != nil {
			return record.Header{}, err
		}
	}
	h, err := peekHeader(r.buf[pos-r.bufPos:])
	if err != nil {
		return record.Header{}, err
	}
	if pos+int64(h.Size()) > r.limit {
		return record.Header{}, fmt.Errorf("%w: batch of %d bytes at position %d runs past %d", record.ErrShort, h.Size(), pos, r.limit)
	}
	return h, nil
}

func (r *headReader) fill(pos int64) error {
	n := min(int64(headWindow), r.limit-pos)
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, headWindow)
	}
	r.buf = r.buf[:n]
	if _, err := r.f.ReadAt(r.buf, pos); err != nil {
		r.bufPos = -1
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	r.bufPos = pos
	return nil
}

// batchContaining walks from pos (a batch boundary at or before the target)
// to the batch whose offsets reach offset. io.EOF if no batch below the
// limit does.
func (r *headReader) batchContaining(pos, offset int64) (int64, batchHead, error) {
	for pos < r.limit {
		h, err := r.at(pos)
		if err != nil {
			return 0, batchHead{}, err
		}
		if h.lastOffset >= offset {
			return pos, h, nil
		}
		pos += h.size
	}
	return 0, batchHead{}, io.EOF
}

// lastBoundaryWithin returns the end of the last whole batch that starts at
// or after from and ends at or before end, walking from a known boundary.
func (r *headReader) lastBoundaryWithin(from, end int64) (int64, error) {
	pos := from
	for pos < r.limit {
		h, err := r.at(pos)
		if err != nil {
			return 0, err
		}
		if pos+h.size > end {
			break
		}
		pos += h.size
	}
	return pos, nil
}

// readBatch reads the whole batch at pos.
func readBatch(f *os.File, pos int64, h batchHead) ([]byte, error) {
	b := make([]byte, h.size)
	if _, err := f.ReadAt(b, pos); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}
