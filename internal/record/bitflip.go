package record

import (
	"encoding/binary"
	"math/bits"
)

// OneBitFlipped reports whether the batch b starts with fails its CRC-32C
// because exactly one bit flipped, in the bytes the CRC covers or in the
// stored CRC itself: the signature of bit rot, as opposed to a stretch of
// the batch that never reached the disk. b must hold the whole batch (its
// header's BatchLength), and the CRC must not match.
//
// A CRC is linear: for two inputs of one length, CRC(a) xor CRC(b) is the
// CRC, with no initial or final inversion, of a xor b. So the mismatch
// between the computed and the stored CRC is the raw CRC of the error
// pattern, and a one-bit error at byte j is the raw CRC of that byte alone
// advanced over the len-1-j zero bytes after it. Walking back from the last
// byte tries every position in one pass over the batch, with no CRC of the
// batch recomputed per position. CRC-32C's Hamming distance is at least 3
// for every batch length Kafka allows, so a match names the one bit.
func OneBitFlipped(b []byte) bool {
	// The length and the stored CRC are read as they are, not through
	// ParseHeader: the flipped bit may be in a field ParseHeader checks
	// (the attributes, LastOffsetDelta, the record count).
	if len(b) < HeaderSize {
		return false
	}
	size := LogOverhead + int(int32(binary.BigEndian.Uint32(b[offBatchLength:])))
	if size < HeaderSize || size > len(b) {
		return false
	}
	syndrome := checksum(b, size) ^ binary.BigEndian.Uint32(b[offCRC:])
	if syndrome == 0 {
		return false
	}
	if bits.OnesCount32(syndrome) == 1 {
		return true // the flip is in the stored CRC
	}
	covered := size - offAttributes
	var errs [8]uint32 // raw CRC of a one-bit error in bit k of the byte under test
	for k := range errs {
		errs[k] = castagnoli[byte(1<<k)]
	}
	for range covered {
		for k, e := range errs {
			if e == syndrome {
				return true
			}
			errs[k] = castagnoli[byte(e)] ^ e>>8 // one more zero byte after the error
		}
	}
	return false
}
