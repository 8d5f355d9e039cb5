package mq

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/record"
)

// streamRecord encodes m as a stream record and decodes the batch back.
func streamRecord(t *testing.T, m *Message) record.Record {
	t.Helper()
	batch, err := encodeStreamRecord(m, 1_700_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := record.Records(batch)
	if err != nil || len(recs) != 1 {
		t.Fatalf("records: %v, %d", err, len(recs))
	}
	return recs[0]
}

func kafkaHeaders(r record.Record) map[string]string {
	out := make(map[string]string)
	for _, h := range r.Headers {
		out[h.Key] = string(h.Value)
	}
	return out
}

func TestStreamCodecAMQPRoundTrip(t *testing.T) {
	ts := time.Unix(1_700_000_123, 0).UTC()
	m := &Message{
		Exchange: "orders-x", RoutingKey: "eu.new",
		Body: []byte("payload"),
		Properties: amqpwire.Properties{
			ContentType: "application/json", ContentEncoding: "gzip", DeliveryMode: 2, Priority: 0,
			CorrelationID: "corr", ReplyTo: "replies", Expiration: "60000", MessageID: "id-7",
			Timestamp: ts, Type: "order.created", UserID: "guest", AppID: "shop", ClusterID: "c1",
			Present: amqpwire.FlagPriority, // present but zero: must survive
			Headers: amqpwire.Table{
				"trace":         "abc",
				"count":         int32(3),
				"big":           int64(1 << 40),
				"ok":            true,
				"ratio":         1.5,
				"price":         amqpwire.Decimal{Scale: 2, Value: 1234},
				"when":          ts,
				"raw":           []byte{0, 1, 2},
				"nested":        amqpwire.Table{"a": "b", "n": int16(2)},
				"list":          []any{"x", int8(1)},
				"nothing":       nil,
				"amqp.reserved": "looks like a property",
				KafkaKeyHeader:  "customer-42",
			},
		},
	}
	r := streamRecord(t, m)
	if string(r.Key) != "customer-42" || string(r.Value) != "payload" {
		t.Fatalf("key %q value %q", r.Key, r.Value)
	}
	kh := kafkaHeaders(r)
	for k, v := range map[string]string{
		"amqp.content-type": "application/json", "amqp.delivery-mode": "2", "amqp.priority": "0",
		"amqp.timestamp": "1700000123", "amqp.message-id": "id-7", "amqp.exchange": "orders-x",
		"amqp.routing-key": "eu.new", "trace": "abc", "count": "3", "ok": "true", "price": "12.34",
		"when": "2023-11-14T22:15:23Z", "nested": `{"a":"b","n":2}`, "list": `["x",1]`,
	} {
		if kh[k] != v {
			t.Errorf("Kafka header %s = %q, want %q", k, kh[k], v)
		}
	}
	if _, ok := kh[KafkaKeyHeader]; ok {
		t.Error("x-kafka-key stored as a header as well as the key")
	}
	if _, ok := kh["amqp.reserved"]; ok {
		t.Error("an application header named amqp.* is stored where a property could be")
	}

	got := decodeStreamMessage(r, 42, "orders")
	want := maps.Clone(m.Properties.Headers)
	want[StreamOffsetHeader] = int64(42)
	if !reflect.DeepEqual(got.Properties.Headers, want) {
		t.Errorf("headers\n got %#v\nwant %#v", got.Properties.Headers, want)
	}
	gp, wp := got.Properties, m.Properties
	gp.Headers, wp.Headers = nil, nil
	if gp.Flags()&^amqpwire.FlagHeaders != wp.Flags()&^amqpwire.FlagHeaders {
		t.Errorf("property flags %016b, want %016b", gp.Flags(), wp.Flags())
	}
	gp.Present, wp.Present = 0, 0
	if !reflect.DeepEqual(gp, wp) {
		t.Errorf("properties\n got %+v\nwant %+v", gp, wp)
	}
	if got.Exchange != "orders-x" || got.RoutingKey != "eu.new" || string(got.Body) != "payload" {
		t.Errorf("exchange %q key %q body %q", got.Exchange, got.RoutingKey, got.Body)
	}
	var decoded amqpwire.Properties
	if err := decoded.Decode(got.RawProperties); err != nil || decoded.MessageID != "id-7" {
		t.Errorf("RawProperties do not decode to the properties: %v %+v", err, decoded)
	}
}

func TestStreamCodecMinimalMessage(t *testing.T) {
	r := streamRecord(t, &Message{RoutingKey: "s"})
	if r.Key != nil || r.Value == nil || len(r.Value) != 0 {
		t.Fatalf("key %v value %v: want a null key and an empty, non-null value", r.Key, r.Value)
	}
	got := decodeStreamMessage(r, 0, "s")
	if got.Properties.Flags() != amqpwire.FlagHeaders || len(got.Properties.Headers) != 1 {
		t.Fatalf("properties %+v", got.Properties)
	}
}

func TestStreamCodecKafkaRecord(t *testing.T) {
	r := record.Record{
		Key:   []byte("k1"),
		Value: []byte("from kafka"),
		Headers: []record.RecordHeader{
			{Key: "trace", Value: []byte("t-1")},
			{Key: "empty", Value: nil},
			{Key: "dup", Value: []byte("first")},
			{Key: "dup", Value: []byte("second")},
			{Key: "amqp.content-type", Value: []byte("text/plain")},
			{Key: "amqp.priority", Value: []byte("high")}, // not a priority: stays a header
			{Key: "amqp.other", Value: []byte("x")},
			{Key: string(make([]byte, 300)), Value: []byte("too long a name for AMQP")},
		},
	}
	m := decodeStreamMessage(r, 7, "orders")
	if m.Exchange != "" || m.RoutingKey != "orders" {
		t.Errorf("exchange %q routing key %q, want \"\" and the queue name", m.Exchange, m.RoutingKey)
	}
	if m.Properties.ContentType != "text/plain" || m.Properties.Flags()&amqpwire.FlagPriority != 0 {
		t.Errorf("properties %+v", m.Properties)
	}
	want := amqpwire.Table{
		"trace": "t-1", "empty": nil, "dup": "second", "amqp.priority": "high", "amqp.other": "x",
		KafkaKeyHeader: "k1", StreamOffsetHeader: int64(7),
	}
	if !reflect.DeepEqual(m.Properties.Headers, want) {
		t.Errorf("headers\n got %#v\nwant %#v", m.Properties.Headers, want)
	}
	if m.RawProperties == nil {
		t.Error("no RawProperties")
	}

	// Republished to a stream, the key and headers come back as they were.
	back := streamRecord(t, m)
	if string(back.Key) != "k1" {
		t.Errorf("key after a round trip %q", back.Key)
	}
	kh := kafkaHeaders(back)
	if kh["trace"] != "t-1" || kh["amqp.content-type"] != "text/plain" || kh["amqp.priority"] != "" {
		t.Errorf("headers after a round trip %v", kh)
	}
}

func TestParseMaxAge(t *testing.T) {
	for s, want := range map[string]int64{
		"1Y": 365 * 86_400_000, "2M": 60 * 86_400_000, "7D": 7 * 86_400_000, "12h": 12 * 3_600_000,
		"30m": 1_800_000, "45s": 45_000,
	} {
		if got, ok := parseMaxAge(s); !ok || got != want {
			t.Errorf("parseMaxAge(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "D", "0D", "7", "7d", "7 D", "-1h", "7Dx", "99999999999999999999s"} {
		if _, ok := parseMaxAge(s); ok {
			t.Errorf("parseMaxAge(%q) accepted", s)
		}
	}
}

// Encoding a message without application headers into a builder that has
// room allocates nothing: the publish path batches many.
func TestStreamEncoderDoesNotAllocate(t *testing.T) {
	m := persistent("x", "rk", strings.Repeat("b", 1024))
	m.Properties.MessageID = "id-1"
	m.Properties.Priority = 4
	var e streamEncoder
	var b record.Builder
	for range 8 { // grow the buffers
		if err := e.appendRecord(&b, m, 0); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		b.Reset()
		if err := e.appendRecord(&b, m, 3); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per message", allocs)
	}
}
