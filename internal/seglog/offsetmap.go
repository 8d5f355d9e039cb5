package seglog

import (
	"bufio"
	"context"
	"io"

	"github.com/wharf-mq/wharf/internal/record"
)

// offsetMapBudget bounds the estimated memory of one pass's key map. Once
// the map passes it, the pass stops taking in dirty segments (after the one
// that crossed it) and the rest waits for the next pass, as Kafka's
// dedupe buffer does. A variable so tests can lower it.
var offsetMapBudget int64 = 128 << 20

// offsetMapEntryCost is a rough per-key cost of a Go map entry holding a
// string key and an int64, on top of the key bytes.
const offsetMapEntryCost = 64

// buildOffsetMap reads the dirty segments oldest first and maps every key to
// the offset of its latest record. It returns how many of dirty it covered
// (at least one): only those may be counted as compacted by this pass.
// Control batches (transaction markers) carry no user keys and are skipped.
func buildOffsetMap(ctx context.Context, dirty []cleanSource) (map[string]int64, int, error) {
	latest := map[string]int64{}
	var cost int64
	for i, src := range dirty {
		if i > 0 && cost > offsetMapBudget {
			return latest, i, nil
		}
		err := src.view.forEachBatch(ctx, func(batch []byte, h record.Header) error {
			// A transactional record may belong to a transaction that was
			// aborted or is still open; letting it shadow an older value
			// could delete committed data (a committed offset in
			// __consumer_offsets, say). The log knows nothing of
			// transaction outcomes, so such records never supersede
			// anything; they are kept as they are (see recordFilter).
			if h.Control() || h.Transactional() {
				return nil
			}
			recs, err := record.Records(batch)
			if err != nil {
				return err
			}
			for _, r := range recs {
				if r.Key == nil {
					continue
				}
				if _, seen := latest[string(r.Key)]; !seen {
					cost += int64(len(r.Key)) + offsetMapEntryCost
				}
				latest[string(r.Key)] = h.BaseOffset + int64(r.OffsetDelta)
			}
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
	}
	return latest, len(dirty), nil
}

// forEachBatch calls fn with every batch of the view in file order, each
// checked with record.Verify; a batch that fails is a *CorruptionError. The
// slice passed to fn is reused for the next batch.
func (v segView) forEachBatch(ctx context.Context, fn func(batch []byte, h record.Header) error) error {
	br := bufio.NewReaderSize(io.NewSectionReader(v.f, 0, v.limit), 1<<20)
	var buf []byte
	for pos := int64(0); pos < v.limit; {
		if err := ctx.Err(); err != nil {
			return err
		}
		head, err := br.Peek(record.HeaderSize)
		if err != nil {
			return &CorruptionError{File: v.seg.logPath, Pos: pos, Err: err}
		}
		h, err := peekHead(head)
		if err != nil {
			return &CorruptionError{File: v.seg.logPath, Pos: pos, Err: err}
		}
		if int64(cap(buf)) < h.size {
			buf = make([]byte, h.size)
		}
		buf = buf[:h.size]
		if _, err := io.ReadFull(br, buf); err != nil {
			return &CorruptionError{File: v.seg.logPath, Pos: pos, Err: err}
		}
		hdr, err := record.Verify(buf)
		if err != nil {
			return &CorruptionError{File: v.seg.logPath, Pos: pos, Err: err}
		}
		if err := fn(buf, hdr); err != nil {
			return err
		}
		pos += h.size
	}
	return nil
}
