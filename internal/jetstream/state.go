package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// stateLog keeps the state that changes with every acknowledgement, in a
// compacted log through the seam (as Kafka keeps committed offsets in
// __consumer_offsets): one record per durable consumer ("c/" and its id)
// and per stream with explicit deletions ("s/" and its id), the newest
// value of a key being the state. Ids, not names, key them, so a stream
// or consumer deleted and created again never inherits the old one's
// state. Records are written in batches by the service's state flusher
// and fsynced with them; at open the whole log is read back.
type stateLog struct {
	log replica.Log
}

// load reads every key's newest value (tombstones remove keys).
func (l stateLog) load() (map[string][]byte, error) {
	state := map[string][]byte{}
	for off := l.log.StartOffset(); off < l.log.HighWatermark(); {
		sl, err := l.log.Read(off, readChunk)
		if err != nil {
			return nil, fmt.Errorf("jetstream: read the state log at %d: %w", off, err)
		}
		data, err := sl.Bytes()
		sl.Release()
		if err != nil {
			return nil, fmt.Errorf("jetstream: read the state log at %d: %w", off, err)
		}
		next := off
		for len(data) > 0 {
			h, err := record.ParseHeader(data)
			if err != nil || h.Size() > len(data) {
				return nil, fmt.Errorf("jetstream: the state log holds a partial batch at %d", h.BaseOffset)
			}
			recs, err := record.Records(data[:h.Size()])
			if err != nil {
				return nil, fmt.Errorf("jetstream: the state log's batch at %d: %w", h.BaseOffset, err)
			}
			for _, r := range recs {
				if r.Value == nil {
					delete(state, string(r.Key))
				} else {
					state[string(r.Key)] = r.Value
				}
			}
			data = data[h.Size():]
			next = h.LastOffset() + 1
		}
		if next == off {
			return nil, errors.New("jetstream: the state log made no progress")
		}
		off = next
	}
	return state, nil
}

// stateRecord is one key's new value; a nil value deletes the key.
type stateRecord struct {
	key   string
	value []byte
}

// write appends the records in one batch and waits until they are
// committed.
func (l stateLog) write(recs []stateRecord) error {
	if len(recs) == 0 {
		return nil
	}
	var b record.Builder
	for _, r := range recs {
		b.Append(record.Record{Key: []byte(r.key), Value: r.value})
	}
	a, err := l.log.Append(b.Build(time.Now().UnixMilli()), replica.AppendOptions{AckCommitted: true})
	if err != nil {
		return fmt.Errorf("jetstream: write the state log: %w", err)
	}
	if err := a.Commit.Wait(context.Background()); err != nil {
		return fmt.Errorf("jetstream: commit the state log: %w", err)
	}
	return nil
}

func streamStateKey(id string) string   { return "s/" + id }
func consumerStateKey(id string) string { return "c/" + id }

// OpenStateLog opens (creating if missing) the state log in dir: a
// compacted log of small segments, so that the cleaner (Service's
// housekeeping calls Compact) keeps it near the size of the live state.
func OpenStateLog(dir string, logger *slog.Logger) (replica.Log, error) {
	cfg := replica.DefaultConfig()
	cfg.Compact, cfg.Delete = true, false
	cfg.SegmentBytes = 16 << 20
	cfg.SegmentMs = time.Hour.Milliseconds()
	cfg.DeleteRetentionMs = time.Hour.Milliseconds()
	return replica.Open(dir, cfg, replica.Options{Logger: logger})
}
