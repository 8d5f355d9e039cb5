package record

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// HeaderSize is the number of bytes of a batch before its first record.
const HeaderSize = 61

// LogOverhead is the number of bytes before and including BatchLength
// (BaseOffset + BatchLength): a batch occupies LogOverhead + BatchLength bytes.
const LogOverhead = 12

// minBatchLength is the smallest BatchLength a batch can have: the fixed
// header after the BatchLength field, with no records.
const minBatchLength = HeaderSize - LogOverhead

// Byte offsets of header fields that this package reads or rewrites.
const (
	offBatchLength          = 8
	offPartitionLeaderEpoch = 12
	offMagic                = 16
	offCRC                  = 17
	offAttributes           = 21 // also where the CRC-covered region starts
	offLastOffsetDelta      = 23
	offMaxTimestamp         = 35
	supportedMagic          = 2
	compressionMask         = 0x07
	logAppendTimeBit        = 0x08
	transactionalBit        = 0x10
	controlBit              = 0x20
)

// ErrShort reports fewer bytes than a batch header, or than the batch's
// BatchLength says. At the end of a log file this is what a torn write
// looks like.
var ErrShort = errors.New("record: short batch")

// ErrCorrupt reports a batch that is not a valid v2 record batch: bad magic,
// bad CRC, inconsistent lengths or counts, or records that do not decode.
var ErrCorrupt = errors.New("record: corrupt batch")

// Compression is the codec of a batch's records (attribute bits 0-2).
type Compression int8

// The codecs Kafka defines.
const (
	None   Compression = 0
	Gzip   Compression = 1
	Snappy Compression = 2
	LZ4    Compression = 3
	Zstd   Compression = 4
)

// String returns the codec's name as Kafka configs spell it.
func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", int8(c))
}

// Header is the decoded fixed 61-byte header of a batch. See the package
// documentation for the byte layout.
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the number of bytes the whole batch occupies:
// LogOverhead + BatchLength.
func (h Header) Size() int { return LogOverhead + int(h.BatchLength) }

// LastOffset is the offset of the batch's last record,
// BaseOffset + LastOffsetDelta.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Compression is the codec of the batch's records.
func (h Header) Compression() Compression { return Compression(h.Attributes & compressionMask) }

// LogAppendTime reports whether the timestamp type is log-append time (set
// by the broker) rather than create time (set by the producer).
func (h Header) LogAppendTime() bool { return h.Attributes&logAppendTimeBit != 0 }

// Transactional reports whether the batch is part of a transaction.
func (h Header) Transactional() bool { return h.Attributes&transactionalBit != 0 }

// Control reports whether the batch holds control records (transaction
// markers) rather than user data.
func (h Header) Control() bool { return h.Attributes&controlBit != 0 }

// ParseHeader decodes the header of the batch that b starts with and checks
// that it is structurally sound: magic 2, a BatchLength that covers at least
// the header, non-negative RecordCount and LastOffsetDelta, and
// len(b) >= Size(). It does not check the CRC (see Verify).
//
// It returns ErrShort if b holds fewer than HeaderSize bytes or fewer than
// Size() bytes, and ErrCorrupt for an impossible header; both are wrapped
// with a description of what was wrong. Whenever b holds at least HeaderSize
// bytes the returned Header is the decoded one, even with an error: a reader
// that has only the first HeaderSize bytes of a batch gets ErrShort and
// learns from Size() how many bytes the batch needs.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrShort, len(b), HeaderSize)
	}
	be := binary.BigEndian
	h := Header{
		BaseOffset:           int64(be.Uint64(b[0:])),
		BatchLength:          int32(be.Uint32(b[8:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[12:])),
		Magic:                int8(b[16]),
		CRC:                  be.Uint32(b[17:]),
		Attributes:           int16(be.Uint16(b[21:])),
		LastOffsetDelta:      int32(be.Uint32(b[23:])),
		BaseTimestamp:        int64(be.Uint64(b[27:])),
		MaxTimestamp:         int64(be.Uint64(b[35:])),
		ProducerID:           int64(be.Uint64(b[43:])),
		ProducerEpoch:        int16(be.Uint16(b[51:])),
		BaseSequence:         int32(be.Uint32(b[53:])),
		RecordCount:          int32(be.Uint32(b[57:])),
	}
	// Magic first: a batch of another message format has a different
	// layout, so nothing else in it means what we would read it as.
	if h.Magic != supportedMagic {
		return h, fmt.Errorf("%w: magic %d, want %d", ErrCorrupt, h.Magic, supportedMagic)
	}
	if h.BatchLength < minBatchLength {
		return h, fmt.Errorf("%w: batch length %d, less than the header's %d", ErrCorrupt, h.BatchLength, minBatchLength)
	}
	if h.RecordCount < 0 {
		return h, fmt.Errorf("%w: negative record count %d", ErrCorrupt, h.RecordCount)
	}
	if h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("%w: negative last offset delta %d", ErrCorrupt, h.LastOffsetDelta)
	}
	if len(b) < h.Size() {
		return h, fmt.Errorf("%w: %d bytes, batch length says %d", ErrShort, len(b), h.Size())
	}
	return h, nil
}
