package record

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
)

// recordStream yields the encoded records of a batch one whole record at a
// time: from a decoder as it decompresses, or from bytes already whole.
// Reading from a decoder it holds the unconsumed bytes in buf, which grows
// only as far as the largest record needs.
type recordStream struct {
	src        *cappedReader // nil when buf holds everything
	codec      Compression
	limit      int // what src is capped at, for error messages
	buf        []byte
	start, end int // buf[start:end] is read and not consumed yet
	eof        bool
}

// minStreamRead is the least a stream asks its decoder for at a time.
const minStreamRead = 32 << 10

// wholeRecords streams records that are all in b already.
func wholeRecords(b []byte) recordStream {
	return recordStream{buf: b, end: len(b), eof: true}
}

// records starts a stream of the records of payload, compressed with c,
// decompressing at most limit bytes. Snappy is decoded whole (see
// unsnappy), the other codecs as the stream is read. The stream's buffer
// is the inflater's, kept for its next batch.
func (inf *inflater) records(c Compression, payload []byte, limit int) (*recordStream, error) {
	buf := inf.stream.buf
	if c == Snappy {
		out, err := unsnappy(buf[:0], payload, limit)
		if err != nil {
			return nil, codecError(c, limit, err)
		}
		inf.stream = wholeRecords(out)
		return &inf.stream, nil
	}
	r, err := inf.open(c, payload, limit)
	if err != nil {
		return nil, err
	}
	inf.stream = recordStream{src: r, codec: c, limit: limit, buf: buf[:cap(buf)]}
	return &inf.stream, nil
}

// fill returns the unconsumed bytes, reading until they start with a whole
// record or the stream ends (the record reader then reports what is cut).
// A record whose stated length goes past what the limit leaves is
// ErrTooLarge at once, before any of it is decompressed.
func (s *recordStream) fill() ([]byte, error) {
	for !s.eof {
		unread := s.buf[s.start:s.end]
		size, known := recordSize(unread)
		if known && size <= len(unread) {
			break
		}
		if known && size-len(unread) > s.src.left {
			return nil, codecError(s.codec, s.limit, errTooLarge)
		}
		if err := s.read(); err != nil {
			return nil, err
		}
	}
	return s.buf[s.start:s.end], nil
}

// consume marks the first n unconsumed bytes as done with.
func (s *recordStream) consume(n int) { s.start += n }

// read adds what the decoder yields next, after moving the unconsumed
// bytes to the front of buf and growing buf if they fill it.
func (s *recordStream) read() error {
	s.end = copy(s.buf, s.buf[s.start:s.end])
	s.start = 0
	if s.end == len(s.buf) {
		s.buf = slices.Grow(s.buf, max(len(s.buf), minStreamRead))
		s.buf = s.buf[:cap(s.buf)]
	}
	n, err := s.src.Read(s.buf[s.end:])
	s.end += n
	switch {
	case err == io.EOF:
		s.eof = true
	case err != nil:
		return codecError(s.codec, s.limit, err)
	}
	return nil
}

// finish reads the stream to its end (a decoder checks its trailer there)
// and fails if anything was left after the last record.
func (s *recordStream) finish() error {
	extra := s.end - s.start
	for !s.eof {
		s.start = s.end
		if err := s.read(); err != nil {
			return err
		}
		extra += s.end - s.start
	}
	if extra != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", ErrCorrupt, extra)
	}
	return nil
}

// recordSize is the size of the record b starts with: its length varint
// plus that many bytes; not known while the varint is cut short. A length
// no record can have gives size 0, so that the record reader reports it at
// once.
func recordSize(b []byte) (size int, known bool) {
	length, n := binary.Varint(b)
	switch {
	case n == 0:
		return 0, false
	case n < 0 || length < 0 || length > math.MaxInt32:
		return 0, true
	}
	return n + int(length), true
}
