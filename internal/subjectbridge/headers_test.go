package subjectbridge

import (
	"reflect"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func TestFromNATSHeader(t *testing.T) {
	block := "NATS/1.0\r\n" +
		"X-Id: 1\r\n" +
		"X-Id: 2\r\n" +
		"content-type: application/json\r\n" +
		"Trace:\t  abc \r\n" +
		"no-colon\r\n" +
		": empty name\r\n" +
		"\r\n" +
		"After: the end\r\n"
	headers, ctype := fromNATSHeader([]byte(block))
	want := amqpwire.Table{"X-Id": []any{"1", "2"}, "Trace": "abc "}
	if !reflect.DeepEqual(headers, want) || ctype != "application/json" {
		t.Fatalf("got %v, %q; want %v, application/json", headers, ctype, want)
	}
	if headers, ctype := fromNATSHeader([]byte("NATS/1.0\r\n\r\n")); headers != nil || ctype != "" {
		t.Fatalf("an empty block gave %v, %q", headers, ctype)
	}
}

// TestNATSHeaderFromAMQP: AMQP field values become header text, and what
// NATS cannot carry (line breaks, names with ':' or spaces, tables) is
// left out rather than breaking the protocol; read back, the block gives
// the same headers as text.
func TestNATSHeaderFromAMQP(t *testing.T) {
	props := amqpwire.Properties{
		ContentType: "text/plain",
		Headers: amqpwire.Table{
			"s": "text", "b": true, "i": int32(-7), "u": uint8(200), "f": 1.5,
			"bytes": []byte("raw"), "when": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			"list":        []any{"x", int64(9), amqpwire.Table{"nested": 1}},
			"table":       amqpwire.Table{"k": "v"},
			"bad value":   "name has a space",
			"a:b":         "name has a colon",
			"crlf":        "line\r\nInjected: yes",
			"void":        nil,
			"dec":         amqpwire.Decimal{Scale: 1, Value: 15},
			"only-tables": []any{amqpwire.Table{}},
		},
	}
	headers, ctype := fromNATSHeader(natsHeader(&props))
	want := amqpwire.Table{
		"s": "text", "b": "true", "i": "-7", "u": "200", "f": "1.5", "bytes": "raw",
		"when": "2026-01-02T03:04:05Z", "list": []any{"x", "9"}, "void": "",
	}
	if !reflect.DeepEqual(headers, want) || ctype != "text/plain" {
		t.Fatalf("got %v, %q\nwant %v, text/plain", headers, ctype, want)
	}
	if b := natsHeader(&amqpwire.Properties{Headers: amqpwire.Table{"t": amqpwire.Table{}}}); b != nil {
		t.Fatalf("nothing to carry gave header block %q", b)
	}
}
