package mq

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/record"
)

// The bridge between AMQP messages and Kafka records in a stream queue's
// topic. One AMQP message is one Kafka record:
//
//   - value: the body (empty, never null);
//   - key: the AMQP header x-kafka-key if it is a string or byte array
//     (the header itself is not stored), else null;
//   - timestamp: the publish time (ms);
//   - headers, in this order:
//     "amqp.<property>" for each property the message carries
//     (content-type, content-encoding, delivery-mode, priority,
//     correlation-id, reply-to, expiration, message-id, timestamp, type,
//     user-id, app-id, cluster-id), as text: delivery-mode and priority
//     in decimal, timestamp in decimal unix seconds;
//     "amqp.exchange" and "amqp.routing-key", always;
//     one header per AMQP application header, sorted by name: a string
//     as its bytes, void as a null value, any other type as readable
//     text (decimal numbers, true/false, RFC 3339 times, byte arrays as
//     they are, tables and arrays as JSON);
//     "amqp.header-types", if some application header is not a string or
//     void, or is named "amqp.<something>": those headers as an AMQP
//     field table, so that their exact types come back.
//
// A record is delivered to AMQP consumers as: the body its value; the
// properties its "amqp.<property>" headers (one that does not parse, such
// as a priority of "high", stays an ordinary header instead); exchange and
// routing key its "amqp.exchange" and "amqp.routing-key" headers, or "" and
// the queue's name without them, as RabbitMQ delivers stream messages
// written by other protocols; every other Kafka header an AMQP header with
// a string value (void for a null value; the last one wins when a name
// repeats; a name longer than 255 bytes, which AMQP cannot carry, is
// dropped), then the entries of "amqp.header-types" over them; a non-null
// key as the header x-kafka-key (a string); and the record's offset as the
// header x-stream-offset (a long), as RabbitMQ adds it. AMQP to Kafka and
// back is lossless, apart from x-stream-offset; Kafka to AMQP and back
// keeps value, key and headers, except repeated header names.

// AMQP headers with a meaning in stream queues.
const (
	// KafkaKeyHeader carries a stream record's Kafka key.
	KafkaKeyHeader = "x-kafka-key"
	// StreamOffsetHeader carries a stream delivery's offset.
	StreamOffsetHeader = "x-stream-offset"
)

// Kafka record headers of an AMQP message in a stream.
const (
	amqpHeaderPrefix   = "amqp."
	kafkaHdrExchange   = "amqp.exchange"
	kafkaHdrRoutingKey = "amqp.routing-key"
	kafkaHdrTypes      = "amqp.header-types"
)

// maxShortstr is the longest AMQP short string.
const maxShortstr = 255

// propertyHeader maps one AMQP property to its Kafka header.
type propertyHeader struct {
	name string
	flag amqpwire.PropertyFlags
	// appendValue appends the property's header value (text) to dst.
	appendValue func(dst []byte, p *amqpwire.Properties) []byte
	set         func(p *amqpwire.Properties, v string) bool // false: not a valid value
}

func stringProperty(name string, flag amqpwire.PropertyFlags, field func(p *amqpwire.Properties) *string) propertyHeader {
	return propertyHeader{
		name: name, flag: flag,
		appendValue: func(dst []byte, p *amqpwire.Properties) []byte { return append(dst, *field(p)...) },
		set: func(p *amqpwire.Properties, v string) bool {
			if len(v) > maxShortstr {
				return false
			}
			*field(p) = v
			return true
		},
	}
}

func octetProperty(name string, flag amqpwire.PropertyFlags, field func(p *amqpwire.Properties) *uint8) propertyHeader {
	return propertyHeader{
		name: name, flag: flag,
		appendValue: func(dst []byte, p *amqpwire.Properties) []byte { return strconv.AppendUint(dst, uint64(*field(p)), 10) },
		set: func(p *amqpwire.Properties, v string) bool {
			n, err := strconv.ParseUint(v, 10, 8)
			if err != nil {
				return false
			}
			*field(p) = uint8(n)
			return true
		},
	}
}

var propertyHeaders = [...]propertyHeader{
	stringProperty("amqp.content-type", amqpwire.FlagContentType, func(p *amqpwire.Properties) *string { return &p.ContentType }),
	stringProperty("amqp.content-encoding", amqpwire.FlagContentEncoding, func(p *amqpwire.Properties) *string { return &p.ContentEncoding }),
	octetProperty("amqp.delivery-mode", amqpwire.FlagDeliveryMode, func(p *amqpwire.Properties) *uint8 { return &p.DeliveryMode }),
	octetProperty("amqp.priority", amqpwire.FlagPriority, func(p *amqpwire.Properties) *uint8 { return &p.Priority }),
	stringProperty("amqp.correlation-id", amqpwire.FlagCorrelationID, func(p *amqpwire.Properties) *string { return &p.CorrelationID }),
	stringProperty("amqp.reply-to", amqpwire.FlagReplyTo, func(p *amqpwire.Properties) *string { return &p.ReplyTo }),
	stringProperty("amqp.expiration", amqpwire.FlagExpiration, func(p *amqpwire.Properties) *string { return &p.Expiration }),
	stringProperty("amqp.message-id", amqpwire.FlagMessageID, func(p *amqpwire.Properties) *string { return &p.MessageID }),
	{
		name: "amqp.timestamp", flag: amqpwire.FlagTimestamp,
		appendValue: func(dst []byte, p *amqpwire.Properties) []byte { return strconv.AppendInt(dst, p.Timestamp.Unix(), 10) },
		set: func(p *amqpwire.Properties, v string) bool {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return false
			}
			p.Timestamp = time.Unix(n, 0).UTC()
			return true
		},
	},
	stringProperty("amqp.type", amqpwire.FlagType, func(p *amqpwire.Properties) *string { return &p.Type }),
	stringProperty("amqp.user-id", amqpwire.FlagUserID, func(p *amqpwire.Properties) *string { return &p.UserID }),
	stringProperty("amqp.app-id", amqpwire.FlagAppID, func(p *amqpwire.Properties) *string { return &p.AppID }),
	stringProperty("amqp.cluster-id", amqpwire.FlagClusterID, func(p *amqpwire.Properties) *string { return &p.ClusterID }),
}

var propertyHeaderByName = func() map[string]*propertyHeader {
	m := make(map[string]*propertyHeader, len(propertyHeaders))
	for i := range propertyHeaders {
		m[propertyHeaders[i].name] = &propertyHeaders[i]
	}
	return m
}()

// encodeStreamRecord builds the one-record batch a message is stored as in
// a stream, timestamped now (unix ms).
func encodeStreamRecord(m *Message, now int64) ([]byte, error) {
	var b record.Builder
	var e streamEncoder
	if err := e.appendRecord(&b, m, 0); err != nil {
		return nil, err
	}
	return b.Build(now), nil
}

// streamEncoder turns messages into stream records (the layout above),
// reusing its buffers from one message to the next so that a message
// without application headers costs no allocation. Not safe for
// concurrent use.
type streamEncoder struct {
	headers []record.RecordHeader
	values  []byte // header values and key; headers point into it
	names   []string
}

// appendRecord encodes m as the next record of b, with timestamp
// tsDelta (ms after the batch's base timestamp). On error b is unchanged.
func (e *streamEncoder) appendRecord(b *record.Builder, m *Message, tsDelta int64) error {
	p := &m.Properties
	flags := p.Flags()
	// Values are appended to e.values first and sliced afterwards, as the
	// buffer may move while it grows.
	hs, vals := e.headers[:0], e.values[:0]
	var ends [len(propertyHeaders) + 2]int
	nprops := 0
	for i := range propertyHeaders {
		ph := &propertyHeaders[i]
		if flags&ph.flag != 0 {
			vals = ph.appendValue(vals, p)
			ends[nprops] = len(vals)
			hs = append(hs, record.RecordHeader{Key: ph.name})
			nprops++
		}
	}
	vals = append(vals, m.Exchange...)
	ends[nprops] = len(vals)
	vals = append(vals, m.RoutingKey...)
	ends[nprops+1] = len(vals)
	hs = append(hs, record.RecordHeader{Key: kafkaHdrExchange}, record.RecordHeader{Key: kafkaHdrRoutingKey})
	start := 0
	for i := range nprops + 2 {
		hs[i].Value = vals[start:ends[i]:ends[i]]
		start = ends[i]
	}
	var key []byte
	if len(p.Headers) > 0 {
		var typed amqpwire.Table
		hs, key, typed = e.appendHeaders(hs, p.Headers)
		if len(typed) > 0 {
			table, err := amqpwire.AppendTable(nil, typed)
			if err != nil {
				return fmt.Errorf("encode message headers: %w", err)
			}
			hs = append(hs, record.RecordHeader{Key: kafkaHdrTypes, Value: table})
		}
	}
	body := m.Body
	if body == nil {
		body = []byte{} // a null value would be a tombstone
	}
	b.Append(record.Record{TimestampDelta: tsDelta, Key: key, Value: body, Headers: hs})
	clear(hs) // drop references to the message until the next one
	e.headers, e.values = hs[:0], vals[:0]
	return nil
}

// appendHeaders adds a header per AMQP application header, sorted by
// name, and returns the Kafka key (x-kafka-key) and the headers whose
// type must be kept in amqp.header-types.
func (e *streamEncoder) appendHeaders(hs []record.RecordHeader, headers amqpwire.Table) (_ []record.RecordHeader, key []byte, typed amqpwire.Table) {
	names := e.names[:0]
	for name := range headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v := headers[name]
		if name == KafkaKeyHeader {
			if s, ok := argString(v); ok {
				key = append([]byte{}, s...) // non-nil: an empty key is not a null one
				continue
			}
		}
		if strings.HasPrefix(name, amqpHeaderPrefix) {
			typed = setTyped(typed, name, v) // never mistaken for a property
			continue
		}
		switch x := v.(type) {
		case string:
			hs = append(hs, record.RecordHeader{Key: name, Value: []byte(x)})
		case nil:
			hs = append(hs, record.RecordHeader{Key: name})
		default:
			hs = append(hs, record.RecordHeader{Key: name, Value: headerText(x)})
			typed = setTyped(typed, name, v)
		}
	}
	clear(names)
	e.names = names[:0]
	return hs, key, typed
}

func setTyped(t amqpwire.Table, name string, v any) amqpwire.Table {
	if t == nil {
		t = make(amqpwire.Table)
	}
	t[name] = v
	return t
}

// headerText is the text form, for Kafka readers, of an AMQP header value
// that is not a string.
func headerText(v any) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case bool:
		return strconv.AppendBool(nil, x)
	case float32:
		return strconv.AppendFloat(nil, float64(x), 'g', -1, 32)
	case float64:
		return strconv.AppendFloat(nil, x, 'g', -1, 64)
	case amqpwire.Decimal:
		return []byte(decimalText(x))
	case time.Time:
		return []byte(x.UTC().Format(time.RFC3339))
	case []any, amqpwire.Table, map[string]any:
		b, err := json.Marshal(jsonValue(x))
		if err != nil {
			return []byte(fmt.Sprint(x))
		}
		return b
	}
	if n, ok := argInt(v); ok {
		return strconv.AppendInt(nil, n, 10)
	}
	return []byte(fmt.Sprint(v))
}

func decimalText(d amqpwire.Decimal) string {
	s := strconv.FormatInt(int64(d.Value), 10)
	if d.Scale == 0 {
		return s
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if n := int(d.Scale) + 1 - len(s); n > 0 {
		s = strings.Repeat("0", n) + s
	}
	s = s[:len(s)-int(d.Scale)] + "." + s[len(s)-int(d.Scale):]
	if neg {
		s = "-" + s
	}
	return s
}

// jsonValue turns an AMQP field value into something encoding/json prints
// readably.
func jsonValue(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case amqpwire.Decimal:
		return json.Number(decimalText(x))
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case amqpwire.Table:
		return jsonValue(map[string]any(x))
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	}
	return v
}

// decodeStreamMessage rebuilds the message of a stream record at offset of
// the stream queue queue (see the layout above). It never fails: what does
// not parse is delivered as plain headers.
func decodeStreamMessage(r record.Record, offset int64, queue string) *Message {
	m := &Message{Body: r.Value, RoutingKey: queue}
	if m.Body == nil {
		m.Body = []byte{}
	}
	p := &m.Properties
	headers := make(amqpwire.Table, len(r.Headers)+2)
	var typed amqpwire.Table
	for _, h := range r.Headers {
		switch ph := propertyHeaderByName[h.Key]; {
		case ph != nil:
			if h.Value != nil && ph.set(p, string(h.Value)) {
				p.Present |= ph.flag
				continue
			}
		case h.Key == kafkaHdrExchange && len(h.Value) <= maxShortstr:
			m.Exchange = string(h.Value)
			continue
		case h.Key == kafkaHdrRoutingKey && len(h.Value) <= maxShortstr:
			m.RoutingKey = string(h.Value)
			continue
		case h.Key == kafkaHdrTypes:
			if t, _, err := amqpwire.ReadTable(h.Value); err == nil {
				typed = t
				continue
			}
		}
		if len(h.Key) > maxShortstr {
			continue
		}
		if h.Value == nil {
			headers[h.Key] = nil
		} else {
			headers[h.Key] = string(h.Value)
		}
	}
	for k, v := range typed {
		headers[k] = v
	}
	if r.Key != nil {
		headers[KafkaKeyHeader] = string(r.Key)
	}
	headers[StreamOffsetHeader] = offset
	p.Headers = headers
	p.Present |= amqpwire.FlagHeaders
	// Encoded once here, so the front end forwards the bytes and can
	// count them; the checks above keep every property encodable.
	if raw, err := p.Encode(nil); err == nil {
		m.RawProperties = raw
	}
	return m
}
