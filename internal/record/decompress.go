package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// decompress appends the decompressed form of a batch's compressed records
// to dst. Output beyond limit bytes, an unknown codec, or input the codec
// rejects is ErrCorrupt.
func decompress(c Compression, dst, src []byte, limit int) ([]byte, error) {
	var err error
	switch c {
	case Gzip:
		dst, err = gunzip(dst, src, limit)
	case Snappy:
		dst, err = unsnappy(dst, src, limit)
	case LZ4:
		dst, err = unlz4(dst, src, limit)
	case Zstd:
		dst, err = unzstd(dst, src, limit)
	default:
		return dst, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, int8(c))
	}
	switch {
	case errors.Is(err, errTooLarge):
		return dst, fmt.Errorf("%w: %s records decompress to more than %d bytes", ErrCorrupt, c, limit)
	case err != nil:
		return dst, fmt.Errorf("%w: %s: %v", ErrCorrupt, c, err)
	}
	return dst, nil
}

var errTooLarge = errors.New("decompressed size over the limit")

// scratch holds decompression output buffers for Validate, which does not
// keep the records, so that validating a compressed batch does not allocate
// its output anew each time. Buffers that grew past maxPooledScratch are
// dropped rather than kept alive.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledScratch = 4 << 20

func getScratch() *[]byte { return scratch.Get().(*[]byte) }

func putScratch(b *[]byte) {
	if cap(*b) > maxPooledScratch {
		return
	}
	scratch.Put(b)
}

// readLimited appends everything r yields to dst, failing with errTooLarge
// once more than limit bytes have been appended.
func readLimited(dst []byte, r io.Reader, limit int) ([]byte, error) {
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			room := limit + 1 - (len(dst) - start) // one past the limit detects overflow
			dst = slices.Grow(dst, min(max(cap(dst), 4<<10), room))
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst, errTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// gzipDecoder is a pooled gzip reader with the bytes.Reader it reads from.
type gzipDecoder struct {
	src bytes.Reader
	zr  *gzip.Reader // nil until the first use: creating one needs a valid header
}

var gzipDecoders = sync.Pool{New: func() any { return new(gzipDecoder) }}

// gunzip decodes one or more concatenated gzip members, as Java's
// GZIPInputStream does.
func gunzip(dst, src []byte, limit int) ([]byte, error) {
	d := gzipDecoders.Get().(*gzipDecoder)
	defer func() {
		d.src.Reset(nil) // do not keep the batch alive from the pool
		gzipDecoders.Put(d)
	}()
	d.src.Reset(src)
	var err error
	if d.zr == nil {
		d.zr, err = gzip.NewReader(&d.src)
	} else {
		err = d.zr.Reset(&d.src)
	}
	if err != nil {
		return dst, err
	}
	return readLimited(dst, d.zr, limit)
}

// lz4Decoder is a pooled LZ4 frame reader with the bytes.Reader it reads from.
type lz4Decoder struct {
	src bytes.Reader
	zr  *lz4.Reader
}

var lz4Decoders = sync.Pool{New: func() any { return &lz4Decoder{zr: lz4.NewReader(nil)} }}

// unlz4 decodes the LZ4 frame format, which Kafka uses for magic 2.
func unlz4(dst, src []byte, limit int) ([]byte, error) {
	d := lz4Decoders.Get().(*lz4Decoder)
	defer func() {
		d.src.Reset(nil) // do not keep the batch alive from the pool
		lz4Decoders.Put(d)
	}()
	d.src.Reset(src)
	d.zr.Reset(&d.src)
	return readLimited(dst, d.zr, limit)
}

// zstdDecoder is shared: DecodeAll is safe for concurrent use. Its memory
// bound is the package-wide limit; smaller limits are checked afterwards.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxDecompressedSize),
		zstd.WithDecoderMaxWindow(MaxDecompressedSize),
	)
})

func unzstd(dst, src []byte, limit int) ([]byte, error) {
	dec, err := zstdDecoder()
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst, err = dec.DecodeAll(src, dst)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || len(dst)-start > limit {
		return dst, errTooLarge
	}
	return dst, err
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
