package record

import "encoding/binary"

// SetBaseOffset writes off as the BaseOffset of the batch b starts with, in
// place. BaseOffset lies outside the CRC, so the CRC stays valid. It panics
// if b is shorter than 8 bytes.
func SetBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[0:8], uint64(off))
}

// SetPartitionLeaderEpoch writes epoch as the PartitionLeaderEpoch of the
// batch b starts with, in place. The field lies outside the CRC (which
// covers the attributes onward), so the CRC stays valid. It panics if b is
// shorter than 16 bytes.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offPartitionLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime marks the batch b starts with as timestamped by the
// broker, in place: it sets the timestamp-type attribute bit, writes ms as
// MaxTimestamp (which consumers then use for every record) and recomputes
// the CRC. b must hold a whole batch that passed ParseHeader; it panics if b
// is shorter than its BatchLength says.
func SetLogAppendTime(b []byte, ms int64) {
	be := binary.BigEndian
	size := LogOverhead + int(int32(be.Uint32(b[offBatchLength:])))
	attrs := be.Uint16(b[offAttributes:])
	be.PutUint16(b[offAttributes:], attrs|logAppendTimeBit)
	be.PutUint64(b[offMaxTimestamp:], uint64(ms))
	be.PutUint32(b[offCRC:], checksum(b, size))
}
