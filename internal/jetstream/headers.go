package jetstream

import (
	"bytes"

	"github.com/wharf-mq/wharf/internal/record"
)

// NATS headers: a block "NATS/1.0[ status[ description]]\r\n", then
// "Name: value\r\n" lines, then "\r\n". A stored message keeps its fields
// as the Kafka record's headers, in order (a name may repeat), so a Kafka
// consumer of the stream's topic sees them; the block is rebuilt from them
// on delivery.

// Header names JetStream acts on.
const (
	hdrMsgID               = "Nats-Msg-Id"
	hdrExpectedStream      = "Nats-Expected-Stream"
	hdrExpectedLastSeq     = "Nats-Expected-Last-Sequence"
	hdrExpectedLastSubjSeq = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectedLastSubject = "Nats-Expected-Last-Subject-Sequence-Subject"
	hdrExpectedLastMsgID   = "Nats-Expected-Last-Msg-Id"
	hdrRollup              = "Nats-Rollup"
	hdrTTL                 = "Nats-TTL"
	hdrIncr                = "Nats-Incr"
	hdrSchedule            = "Nats-Schedule"
	hdrBatchID             = "Nats-Batch-Id"
)

const headerVersion = "NATS/1.0"

// maxHeaderSize is the largest header block a stream stores, nats-server's.
const maxHeaderSize = 64 << 10

// headerFields returns the fields of a header block; the status line is
// left out (a published message has none).
func headerFields(block []byte) []record.RecordHeader {
	_, rest, ok := bytes.Cut(block, []byte("\r\n"))
	if !ok {
		return nil
	}
	var fields []record.RecordHeader
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) == 0 {
			continue // the closing empty line, or a line that is no field
		}
		fields = append(fields, record.RecordHeader{Key: string(name), Value: bytes.TrimSpace(value)})
	}
	return fields
}

// headerValue returns the value of the first field named name in a header
// block ("" if none), matching the name exactly as nats-server does.
func headerValue(block []byte, name string) string {
	if len(block) == 0 {
		return ""
	}
	_, rest, _ := bytes.Cut(block, []byte("\r\n"))
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && string(k) == name {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}

// appendHeaderBlock appends the header block of fields, after a status
// line with status (and description) when status is not empty.
func appendHeaderBlock(dst []byte, status, description string, fields []record.RecordHeader) []byte {
	dst = append(dst, headerVersion...)
	if status != "" {
		dst = append(dst, ' ')
		dst = append(dst, status...)
		if description != "" {
			dst = append(dst, ' ')
			dst = append(dst, description...)
		}
	}
	dst = append(dst, "\r\n"...)
	for _, f := range fields {
		dst = append(dst, f.Key...)
		dst = append(dst, ": "...)
		dst = append(dst, f.Value...)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// headerBlock is the block of fields, nil for none.
func headerBlock(fields []record.RecordHeader) []byte {
	if len(fields) == 0 {
		return nil
	}
	return appendHeaderBlock(nil, "", "", fields)
}

// statusHeader is the header block of a status message (a pull request's
// 404 or 408, a heartbeat) with fields.
func statusHeader(status, description string, fields ...record.RecordHeader) []byte {
	return appendHeaderBlock(nil, status, description, fields)
}

// field is a header field for statusHeader and the like.
func field(name, value string) record.RecordHeader {
	return record.RecordHeader{Key: name, Value: []byte(value)}
}

// withField returns a header block with the field name: value added to
// block (which may be nil).
func withField(block []byte, name, value string) []byte {
	if len(block) < len(headerVersion)+4 {
		return statusHeader("", "", field(name, value))
	}
	out := make([]byte, 0, len(block)+len(name)+len(value)+4)
	out = append(out, block[:len(block)-2]...) // up to the closing empty line
	out = append(out, name...)
	out = append(out, ": "...)
	out = append(out, value...)
	return append(out, "\r\n\r\n"...)
}
