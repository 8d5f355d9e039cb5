package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Decompression goes through a fixed set of inflaters, one per CPU: a
// batch is inflated only while its caller holds one, so a produce request
// of many compressed partitions (or many such requests) inflates at most
// GOMAXPROCS batches at once, each stopped at its limit. What decompression
// holds at any moment is therefore bounded by the number of inflaters times
// what one holds (its decoders' windows and a buffer, both bounded by the
// limit), never by what the batches would inflate to.

// inflater is one slot of decompression: the codecs' decoders, reused from
// batch to batch, and the stream (with its buffer) ValidateWithin reads
// records through.
type inflater struct {
	src    bytes.Reader // the compressed bytes the decoders read
	gzip   *gzip.Reader // nil until the first gzip batch: creating one needs a valid header
	lz4    *lz4.Reader
	zstd   *zstd.Decoder // nil until the first zstd batch
	capped cappedReader
	stream recordStream
}

// inflaters holds the idle inflaters; taking one is what admits a batch to
// be inflated.
var inflaters = func() chan *inflater {
	n := max(2, runtime.GOMAXPROCS(0))
	ch := make(chan *inflater, n)
	for range n {
		ch <- &inflater{lz4: lz4.NewReader(nil)}
	}
	return ch
}()

// maxKeptBuffer bounds the stream buffer an idle inflater keeps; one that
// grew past it for a large record is dropped.
const maxKeptBuffer = 4 << 20

// acquireInflater waits for an idle inflater. Holders only decode bytes
// already in memory, so the wait is bounded by their CPU work.
func acquireInflater() *inflater { return <-inflaters }

// release returns inf to the idle set, letting go of the batch it read.
func (inf *inflater) release() {
	inf.src.Reset(nil)
	inf.capped = cappedReader{}
	buf := inf.stream.buf[:0]
	if cap(buf) > maxKeptBuffer {
		buf = nil
	}
	inf.stream = recordStream{buf: buf}
	inflaters <- inf
}

// open starts decoding src, a batch's records compressed with c, and
// returns a reader of at most limit decompressed bytes (past that it fails
// with errTooLarge). Snappy has no streaming decoder here: use unsnappy.
func (inf *inflater) open(c Compression, src []byte, limit int) (*cappedReader, error) {
	inf.src.Reset(src)
	var (
		r   io.Reader
		err error
	)
	switch c {
	case Gzip:
		// Concatenated gzip members are read as one stream, as Java's
		// GZIPInputStream does.
		if inf.gzip == nil {
			inf.gzip, err = gzip.NewReader(&inf.src)
		} else {
			err = inf.gzip.Reset(&inf.src)
		}
		r = inf.gzip
	case LZ4: // the LZ4 frame format, which Kafka uses for magic 2
		inf.lz4.Reset(&inf.src)
		r = inf.lz4
	case Zstd:
		r, err = inf.openZstd(limit)
	default:
		return nil, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, int8(c))
	}
	if err != nil {
		return nil, codecError(c, limit, err)
	}
	inf.capped = cappedReader{r: r, left: limit}
	return &inf.capped, nil
}

// zstdWindow is the largest window a zstd frame may declare when at most
// limit bytes may come out of it: the decoder allocates the declared
// window, so it is bounded, but never below the 8 MiB the zstd format asks
// every decoder to support (compression levels up to 19 stay within it).
func zstdWindow(limit int) int { return max(8<<20, limit) }

// openZstd resets the inflater's zstd decoder, decoding synchronously
// (no goroutines) with the window bounded. The decoder keeps the largest
// window it has used, so an inflater holds at most zstdWindow of the
// largest limit it was opened with.
func (inf *inflater) openZstd(limit int) (io.Reader, error) {
	window := zstd.WithDecoderMaxWindow(uint64(zstdWindow(limit)))
	if inf.zstd == nil {
		d, err := zstd.NewReader(&inf.src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), window)
		if err != nil {
			return nil, err
		}
		inf.zstd = d
		return d, nil
	}
	return inf.zstd, inf.zstd.ResetWithOptions(&inf.src, window)
}

// errTooLarge is what a decompression stops with past its limit.
var errTooLarge = errors.New("decompressed size over the limit")

// cappedReader passes on at most left bytes of r, and fails with
// errTooLarge once r yields more.
type cappedReader struct {
	r    io.Reader
	left int
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if len(p) > c.left+1 { // one past the limit detects overflow
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= n
	if c.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

// codecError is how a decompression failure is reported: over the limit is
// ErrTooLarge, anything else the codec rejects is ErrCorrupt.
func codecError(c Compression, limit int, err error) error {
	switch {
	case errors.Is(err, errTooLarge):
		return fmt.Errorf("%w: %s records decompress to more than %d bytes", ErrTooLarge, c, limit)
	case errors.Is(err, zstd.ErrWindowSizeExceeded):
		return fmt.Errorf("%w: zstd frame declares a window over %d bytes", ErrTooLarge, zstdWindow(limit))
	}
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, c, err)
}

// decompress returns the decompressed form of a batch's compressed
// records in a new slice: at most limit bytes, else ErrTooLarge; an
// unknown codec or input the codec rejects is ErrCorrupt.
func decompress(c Compression, src []byte, limit int) ([]byte, error) {
	inf := acquireInflater()
	defer inf.release()
	var (
		out []byte
		err error
	)
	switch c {
	case Snappy:
		out, err = unsnappy(nil, src, limit)
	case Zstd:
		out, err = unzstd(src, limit)
	default:
		var r *cappedReader
		if r, err = inf.open(c, src, limit); err != nil {
			return nil, err
		}
		out, err = readAll(r)
	}
	if err != nil {
		return nil, codecError(c, limit, err)
	}
	return out, nil
}

// zstdDecodeAll decodes whole zstd batches for decompress: DecodeAll
// decodes straight into its output, so unlike a streaming decoder it keeps
// no window of the largest frame it has seen. It is safe for concurrent
// use; its memory bound is the package-wide limit, smaller limits are
// checked afterwards.
var zstdDecodeAll = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxDecompressedSize),
		zstd.WithDecoderMaxWindow(MaxDecompressedSize),
	)
})

func unzstd(src []byte, limit int) ([]byte, error) {
	dec, err := zstdDecodeAll()
	if err != nil {
		return nil, err
	}
	out, err := dec.DecodeAll(src, nil)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || len(out) > limit {
		return nil, errTooLarge
	}
	return out, err
}

// readAll reads r to its end into a new slice.
func readAll(r io.Reader) ([]byte, error) {
	var out []byte
	for {
		if len(out) == cap(out) {
			out = slices.Grow(out, max(cap(out), 4<<10))
		}
		n, err := r.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// xerialMagic starts snappy data framed by the xerial snappy-java library,
// which Java clients use: the magic, a 4-byte version, a 4-byte compatible
// version, then blocks each prefixed by a 4-byte big-endian length. Other
// clients send one raw snappy block. A valid raw block cannot start with
// these bytes: after the length varint (0x82 0x53) the first tag ('N') would
// be a copy, and a block cannot start with a copy. So the prefix tells the
// two apart, as in Kafka and franz-go.
const xerialMagic = "\x82SNAPPY\x00"

const xerialHeaderSize = len(xerialMagic) + 8

// unsnappy appends the decoded form of snappy data to dst, whole: a raw
// snappy block cannot be decoded piecewise, but it states its decoded
// length up front, so nothing past limit bytes is ever allocated.
func unsnappy(dst, src []byte, limit int) ([]byte, error) {
	if len(src) >= xerialHeaderSize && string(src[:len(xerialMagic)]) == xerialMagic {
		return unxerial(dst, src[xerialHeaderSize:], limit)
	}
	return appendSnappyBlock(dst, src, len(dst)+limit)
}

func unxerial(dst, blocks []byte, limit int) ([]byte, error) {
	end := len(dst) + limit
	for len(blocks) > 0 {
		if len(blocks) < 4 {
			return dst, fmt.Errorf("xerial block length cut short")
		}
		n := binary.BigEndian.Uint32(blocks)
		blocks = blocks[4:]
		if uint64(n) > uint64(len(blocks)) {
			return dst, fmt.Errorf("xerial block of %d bytes with %d left", n, len(blocks))
		}
		var err error
		if dst, err = appendSnappyBlock(dst, blocks[:n], end); err != nil {
			return dst, err
		}
		blocks = blocks[n:]
	}
	return dst, nil
}

// appendSnappyBlock decodes one raw snappy block onto dst, refusing to grow
// dst past end bytes. The block states its decoded length up front, so the
// bound is checked before anything is allocated.
func appendSnappyBlock(dst, block []byte, end int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, err
	}
	if n > end-len(dst) {
		return dst, errTooLarge
	}
	dst = slices.Grow(dst, n)
	tail := dst[len(dst) : len(dst)+n]
	out, err := snappy.Decode(tail, block)
	if err != nil {
		return dst, err
	}
	if n > 0 && &out[0] != &tail[0] { // Decode had to allocate; not expected with room for n
		copy(tail, out)
	}
	return dst[:len(dst)+n], nil
}
