package jetstream

import (
	"errors"

	"github.com/wharf-mq/wharf/internal/replica"
)

// readChunk is how much of a log one read takes: a consumer's read-ahead,
// the head reader's.
const readChunk = 256 << 10

// readMessages reads the messages of log from sequence from on, about
// maxBytes of batches (at least one batch). Past the end it returns none;
// below the log start it starts at the log start.
func readMessages(log StreamLog, name string, from uint64, maxBytes int64) ([]*Message, error) {
	off := max(offsetOf(from), log.StartOffset())
	if off >= log.EndOffset() {
		return nil, nil
	}
	sl, err := log.Read(off, maxBytes)
	if errors.Is(err, replica.ErrOffsetOutOfRange) && off < log.StartOffset() {
		return readMessages(log, name, seqOf(log.StartOffset()), maxBytes) // trimmed meanwhile
	}
	if err != nil {
		return nil, err
	}
	data, err := sl.Bytes()
	sl.Release()
	if err != nil {
		return nil, err
	}
	return decodeBatches(nil, data, from, name)
}

// readMessage reads the message of sequence seq, nil if the log does not
// hold it.
func readMessage(log StreamLog, name string, seq uint64) (*Message, error) {
	if offsetOf(seq) < log.StartOffset() || offsetOf(seq) >= log.EndOffset() {
		return nil, nil
	}
	msgs, err := readMessages(log, name, seq, 1)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if m.Seq == seq {
			return m, nil
		}
	}
	return nil, nil
}

// cursor reads a log forward, a chunk at a time, keeping what it read so
// that walking it message by message costs one read per chunk.
type cursor struct {
	log  StreamLog
	name string
	buf  []*Message
}

// at returns the message of sequence seq or, when the log holds none
// there (Kafka control records, compaction), the next one after it; nil
// past the end.
func (c *cursor) at(seq uint64) (*Message, error) {
	for len(c.buf) > 0 && c.buf[0].Seq < seq {
		c.buf = c.buf[1:]
	}
	if len(c.buf) == 0 {
		msgs, err := readMessages(c.log, c.name, seq, readChunk)
		if err != nil {
			return nil, err
		}
		c.buf = msgs
		for len(c.buf) > 0 && c.buf[0].Seq < seq {
			c.buf = c.buf[1:]
		}
		if len(c.buf) == 0 {
			return nil, nil
		}
	}
	return c.buf[0], nil
}

// reset forgets what was read (after the log was cut or rewritten).
func (c *cursor) reset() { c.buf = nil }
