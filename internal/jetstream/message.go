package jetstream

import (
	"fmt"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/subjects"
)

// A stream's message is one Kafka record of its topic: the subject is the
// key, the NATS header fields are the record's headers, the payload is the
// value and the stream sequence is the offset + 1 (JetStream counts from
// 1). The time is the record's timestamp, in milliseconds: sequences and
// subjects round-trip exactly, times to the millisecond.

// Message is a stored message.
type Message struct {
	Subject string
	Seq     uint64
	Time    time.Time
	Header  []byte // the NATS header block, nil for none
	Data    []byte
}

// seqOf and offsetOf convert between stream sequences and log offsets.
func seqOf(offset int64) uint64 { return uint64(offset) + 1 }
func offsetOf(seq uint64) int64 { return int64(seq) - 1 }

// storedSize is what a message counts towards the stream's bytes, by
// nats-server's file store formula, so that max_bytes means the same.
func storedSize(subject string, header, data []byte) uint64 {
	n := 22 + len(subject) + len(header) + len(data) + 8
	if len(header) > 0 {
		n += 4
	}
	return uint64(n)
}

func (m *Message) size() uint64 { return storedSize(m.Subject, m.Header, m.Data) }

// encodeRecord is the record batch holding one message published now.
func encodeRecord(subject string, header, data []byte, now time.Time) []byte {
	if data == nil {
		data = []byte{} // a null value is a tombstone to Kafka
	}
	return record.NewBatch(now.UnixMilli(), []record.Record{{
		Key: []byte(subject), Value: data, Headers: headerFields(header),
	}})
}

// decodeBatches appends the messages of whole batches in data with a
// sequence of at least from, as read from the log of stream name.
// Control batches (Kafka transaction markers) hold no messages.
func decodeBatches(msgs []*Message, data []byte, from uint64, name string) ([]*Message, error) {
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil || h.Size() > len(data) {
			return msgs, fmt.Errorf("jetstream: stream %s: a partial batch at offset %d", name, h.BaseOffset)
		}
		batch := data[:h.Size()]
		data = data[h.Size():]
		if seqOf(h.LastOffset()) < from || h.Control() {
			continue
		}
		recs, err := record.Records(batch)
		if err != nil {
			return msgs, fmt.Errorf("jetstream: stream %s: batch at offset %d: %w", name, h.BaseOffset, err)
		}
		for _, r := range recs {
			seq := seqOf(h.BaseOffset + int64(r.OffsetDelta))
			if seq < from {
				continue
			}
			msgs = append(msgs, &Message{
				Subject: subjectOf(r.Key, name),
				Seq:     seq,
				Time:    time.UnixMilli(h.BaseTimestamp + r.TimestampDelta).UTC(),
				Header:  headerBlock(r.Headers),
				Data:    r.Value,
			})
		}
	}
	return msgs, nil
}

// subjectOf is the subject of a record: its key, or, for a record a Kafka
// producer wrote whose key is no NATS subject, the stream's name (which is
// also the subject of a stream configured without subjects).
func subjectOf(key []byte, stream string) string {
	if s := string(key); subjects.ValidLiteral(s) {
		return s
	}
	return stream
}
