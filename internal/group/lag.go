package group

import (
	"errors"
	"fmt"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/record"
)

// PartitionLag is how far a group is behind on one partition.
type PartitionLag struct {
	Topic     string
	Partition int32
	Committed int64
	End       int64 // log end offset (the high watermark on one node)
	Lag       int64 // records between the committed offset and the end
	// NextTimestamp is the timestamp of the next record the group will
	// consume (zero when it has caught up); TimeLag is how old it is.
	NextTimestamp time.Time
	TimeLag       time.Duration
	Err           error
}

// Lag reports, for every partition the group has committed, its lag in
// records and in time: the age of the first record it has not consumed.
func (c *Coordinator) Lag(groupID string) ([]PartitionLag, error) {
	return c.lag(groupID, true)
}

// RecordLag is Lag in records only: it reads no record, so it costs no
// I/O however many partitions lag (what a metrics scrape wants).
func (c *Coordinator) RecordLag(groupID string) ([]PartitionLag, error) {
	return c.lag(groupID, false)
}

func (c *Coordinator) lag(groupID string, inTime bool) ([]PartitionLag, error) {
	offsets, err := c.FetchOffsets(FetchRequest{Group: groupID})
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	out := make([]PartitionLag, 0, len(offsets))
	for _, o := range offsets {
		out = append(out, c.partitionLag(o.Topic, o.Partition, o.Offset, now, inTime))
	}
	return out, nil
}

func (c *Coordinator) partitionLag(topic string, partition int32, committed int64, now time.Time, inTime bool) PartitionLag {
	l := PartitionLag{Topic: topic, Partition: partition, Committed: committed, End: -1, Lag: -1}
	t, err := c.cfg.Broker.Topic(topic)
	if err != nil {
		l.Err = err
		return l
	}
	p, err := t.Partition(partition)
	if err != nil {
		l.Err = err
		return l
	}
	l.End = p.HighWatermark()
	if l.End < 0 {
		// No replica here (in a cluster another node may hold the
		// partition) or offline: the lag is unknown, not 0.
		l.Err = fmt.Errorf("%s-%d: no readable replica on this node, so its end offset is unknown", topic, partition)
		return l
	}
	from := max(committed, p.StartOffset())
	l.Lag = max(0, l.End-from)
	if l.Lag == 0 || !inTime {
		return l
	}
	ts, found, err := recordTimeAt(p, from)
	if err != nil {
		l.Err = err
		return l
	}
	if found {
		l.NextTimestamp = ts
		l.TimeLag = max(0, now.Sub(ts))
	}
	return l
}

// recordTimeAt is the timestamp of the first record at or after offset.
func recordTimeAt(p *broker.Partition, offset int64) (time.Time, bool, error) {
	slice, err := p.Read(offset, 1)
	if errors.Is(err, broker.ErrOffsetOutOfRange) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	data, err := slice.Bytes()
	slice.Release()
	if err != nil {
		return time.Time{}, false, err
	}
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil {
			return time.Time{}, false, err
		}
		if h.LastOffset() >= offset && !h.Control() {
			recs, err := record.Records(data[:h.Size()])
			if err != nil {
				return time.Time{}, false, err
			}
			for _, r := range recs {
				if h.BaseOffset+int64(r.OffsetDelta) >= offset {
					if h.LogAppendTime() {
						return time.UnixMilli(h.MaxTimestamp), true, nil
					}
					return time.UnixMilli(h.BaseTimestamp + r.TimestampDelta), true, nil
				}
			}
		}
		data = data[h.Size():]
	}
	return time.Time{}, false, nil
}
