package queuestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// How messages and settlements are laid out in a durable queue's logs.

// Message is a message as a queue's messages log keeps it. The store does
// not interpret it: Properties are the AMQP property flags and list as
// encoded on the wire, which the queueing core encodes and decodes.
type Message struct {
	Exchange, RoutingKey string
	Properties           []byte
	Body                 []byte
}

// Record header keys of a message record.
const (
	hdrExchange   = "x"
	hdrRoutingKey = "k"
	hdrProperties = "p"
)

// The settlement log has two kinds of records, told apart by their key:
// settled offsets, and delivery counts of a quorum queue's messages (the
// later record for an offset wins).
var (
	settleRecordKey = []byte("s")
	countRecordKey  = []byte("d")
)

// EncodeMessage builds the record batch a message is logged as, for
// Store.AppendLocked and Store.BufferLocked; one batch may go to several
// stores. Its timestamp is the enqueue time (unix ms): TTLs count from
// it, also after a restart.
func EncodeMessage(m Message, enqueued int64) []byte {
	return record.NewBatch(enqueued, []record.Record{MessageRecord(m)})
}

// MessageRecord is the record a message is logged as (EncodeMessage's,
// and a quorum queue's enqueue record, in a batch with others).
func MessageRecord(m Message) record.Record {
	return record.Record{
		Value: m.Body,
		Headers: []record.RecordHeader{
			{Key: hdrExchange, Value: []byte(m.Exchange)},
			{Key: hdrRoutingKey, Value: []byte(m.RoutingKey)},
			{Key: hdrProperties, Value: m.Properties},
		},
	}
}

// DecodeMessage rebuilds a message from its record (as EncodeMessage
// built it). A message without a body gets an empty one, not nil.
func DecodeMessage(r record.Record) Message {
	m := Message{Body: r.Value}
	if m.Body == nil {
		m.Body = []byte{}
	}
	for _, h := range r.Headers {
		switch h.Key {
		case hdrExchange:
			m.Exchange = string(h.Value)
		case hdrRoutingKey:
			m.RoutingKey = string(h.Value)
		case hdrProperties:
			m.Properties = h.Value
		}
	}
	return m
}

// rangesOf sorts offsets and returns them as [from, to) runs.
func rangesOf(offs []int64) [][2]int64 {
	slices.Sort(offs)
	var out [][2]int64
	for _, o := range offs {
		if n := len(out); n > 0 && out[n-1][1] >= o {
			out[n-1][1] = max(out[n-1][1], o+1)
			continue
		}
		out = append(out, [2]int64{o, o + 1})
	}
	return out
}

// encodeRanges writes ascending [from, to) runs as uvarint pairs: the gap
// from the previous run's end, and the run length.
func encodeRanges(rs [][2]int64) []byte {
	b := make([]byte, 0, 4*len(rs))
	prev := int64(0)
	for _, r := range rs {
		b = binary.AppendUvarint(b, uint64(r[0]-prev))
		b = binary.AppendUvarint(b, uint64(r[1]-r[0]))
		prev = r[1]
	}
	return b
}

func decodeRanges(b []byte, fn func(from, to int64)) error {
	prev := int64(0)
	for len(b) > 0 {
		gap, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("corrupt settlement record")
		}
		b = b[n:]
		length, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("corrupt settlement record")
		}
		b = b[n:]
		from := prev + int64(gap)
		fn(from, from+int64(length))
		prev = from + int64(length)
	}
	return nil
}

// encodeCounts writes delivery counts as uvarint pairs, ascending by
// offset: the offset's distance from the previous one, and the count.
func encodeCounts(counts map[int64]uint32) []byte {
	offs := slices.Sorted(maps.Keys(counts))
	b := make([]byte, 0, 4*len(offs))
	prev := int64(0)
	for _, off := range offs {
		b = binary.AppendUvarint(b, uint64(off-prev))
		b = binary.AppendUvarint(b, uint64(counts[off]))
		prev = off
	}
	return b
}

func decodeCounts(b []byte, fn func(off int64, n uint32)) error {
	prev := int64(0)
	for len(b) > 0 {
		gap, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("corrupt delivery count record")
		}
		b = b[n:]
		count, n := binary.Uvarint(b)
		if n <= 0 || count > math.MaxUint32 {
			return errors.New("corrupt delivery count record")
		}
		b = b[n:]
		prev += int64(gap)
		fn(prev, uint32(count))
	}
	return nil
}

// readLog calls fn for every record of l from its start offset.
func readLog(l *replica.Local, fn func(record.Record) error) error {
	for offset := l.StartOffset(); offset < l.EndOffset(); {
		sl, err := l.Read(offset, 1<<20)
		if err != nil {
			return err
		}
		data, err := sl.Bytes()
		sl.Release()
		if err != nil {
			return err
		}
		if len(data) == 0 {
			return fmt.Errorf("no data at offset %d below end %d", offset, l.EndOffset())
		}
		for len(data) > 0 {
			h, err := record.ParseHeader(data)
			if err != nil {
				return err
			}
			recs, err := record.Records(data[:h.Size()])
			if err != nil {
				return err
			}
			for i, r := range recs {
				if h.BaseOffset+int64(i) < offset {
					continue
				}
				if err := fn(r); err != nil {
					return err
				}
			}
			offset = h.LastOffset() + 1
			data = data[h.Size():]
		}
	}
	return nil
}
