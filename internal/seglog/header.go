package seglog

import (
	"errors"

	"github.com/wharf-mq/wharf/internal/record"
)

// batchHead is the part of a batch header the log needs to walk a segment
// file: where the next batch starts, which offsets and timestamps this one
// covers, and the leader epoch it was written under.
type batchHead struct {
	baseOffset   int64
	lastOffset   int64
	size         int64 // record.LogOverhead + BatchLength: bytes from this batch to the next
	maxTimestamp int64
	epoch        int32 // PartitionLeaderEpoch
}

func headOf(h record.Header) batchHead {
	return batchHead{
		baseOffset:   h.BaseOffset,
		lastOffset:   h.LastOffset(),
		size:         int64(h.Size()),
		maxTimestamp: h.MaxTimestamp,
		epoch:        h.PartitionLeaderEpoch,
	}
}

// peekHead decodes the header at the start of b when b may hold only the
// first record.HeaderSize bytes of the batch: a walk over a file must not
// read megabytes of records to skip a batch. record.ParseHeader returns the
// decoded header with ErrShort in exactly that case; any other error means
// the header itself is bad. No CRC check (that is record.Verify's job).
func peekHead(b []byte) (batchHead, error) {
	h, err := peekHeader(b)
	if err != nil {
		return batchHead{}, err
	}
	return headOf(h), nil
}

// peekHeader is peekHead returning the whole decoded header.
func peekHeader(b []byte) (record.Header, error) {
	if len(b) > record.HeaderSize {
		b = b[:record.HeaderSize]
	}
	h, err := record.ParseHeader(b)
	if err != nil && (len(b) < record.HeaderSize || !errors.Is(err, record.ErrShort)) {
		return record.Header{}, err
	}
	return h, nil
}
