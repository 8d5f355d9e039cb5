package broker

import (
	"fmt"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// replayReadBytes is how much one read of a replay asks for.
const replayReadBytes = 1 << 20

// ReadRecords reads the partition from offset from up to its end offset at
// the time of the call, one batch at a time, oldest first, and calls fn
// with each batch's header and its records at or after from. A batch with
// no such records (a marker below from, the empty batch compaction leaves
// at the log start) is skipped. It is how internal topics (group offsets,
// transaction state) are loaded at start.
//
// In a compacted log the batches before the end offset may all be gone;
// reading then stops early without error. An error from fn ends the read
// and is returned as is; other errors name the offset they happened at.
func (p *Partition) ReadRecords(from int64, fn func(h record.Header, recs []record.Record) error) error {
	_, err := readRecords(p.Read, from, p.EndOffset(), fn)
	return err
}

// readRecords is ReadRecords over any log read function: it reads [from,
// end) and returns the offset after the last batch it read, which is
// below end only if the log ran out of batches first.
func readRecords(read func(offset, maxBytes int64) (*replica.Slice, error), from, end int64,
	fn func(h record.Header, recs []record.Record) error) (next int64, err error) {
	next = from
	for next < end {
		slice, err := read(next, replayReadBytes)
		if err != nil {
			return next, err
		}
		data, err := slice.Bytes()
		slice.Release()
		if err != nil {
			return next, fmt.Errorf("reading at offset %d: %w", next, err)
		}
		if len(data) == 0 {
			return next, nil
		}
		for len(data) > 0 {
			h, err := record.ParseHeader(data)
			if err != nil {
				return next, fmt.Errorf("batch at offset %d: %w", next, err)
			}
			recs, err := record.Records(data[:h.Size()])
			if err != nil {
				return next, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
			}
			recs = recordsFrom(h, recs, from)
			if len(recs) > 0 {
				if err := fn(h, recs); err != nil {
					return next, err
				}
			}
			next = h.LastOffset() + 1
			data = data[h.Size():]
		}
	}
	return next, nil
}

// recordsFrom drops the records of a batch below offset from: a read
// starts with the whole batch that holds its offset, as in Kafka.
func recordsFrom(h record.Header, recs []record.Record, from int64) []record.Record {
	for len(recs) > 0 && h.BaseOffset+int64(recs[0].OffsetDelta) < from {
		recs = recs[1:]
	}
	return recs
}
