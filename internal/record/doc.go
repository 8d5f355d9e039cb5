// Package record reads, checks and builds Kafka record batches (message
// format v2, "magic 2"), the unit in which Wharf stores data.
//
// The storage engine keeps batches exactly as producers sent them; this
// package is what lets it (and the protocol front ends) look inside one:
// parse the fixed 61-byte header, verify the CRC-32C, rewrite the fields the
// broker owns (base offset, log-append time), iterate the records of a batch
// (decompressing gzip, snappy, lz4 and zstd), and build new batches for the
// broker's own internal logs.
//
// Field layout (all big-endian), as the Kafka protocol defines it:
//
//	0  BaseOffset           int64
//	8  BatchLength          int32   bytes after this field
//	12 PartitionLeaderEpoch int32
//	16 Magic                int8    must be 2
//	17 CRC                  uint32  CRC-32C of bytes 21..end
//	21 Attributes           int16
//	23 LastOffsetDelta      int32
//	27 BaseTimestamp        int64
//	35 MaxTimestamp         int64
//	43 ProducerID           int64
//	51 ProducerEpoch        int16
//	53 BaseSequence         int32
//	57 RecordCount          int32
//	61 records...
package record
