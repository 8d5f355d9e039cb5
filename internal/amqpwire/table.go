package amqpwire

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// Table is an AMQP field table: method arguments, message headers, peer
// properties. Values decode to, and may be encoded from, these Go types (with
// the type octet RabbitMQ uses for each):
//
//	bool 't'   int8 'b'    uint8 'B'    int16 's'    uint16 'u'
//	int32 'I'  uint32 'i'  int64 'l'    float32 'f'  float64 'd'
//	Decimal 'D'   string 'S' (long string)   []byte 'x'   []any 'A'
//	time.Time 'T' (whole seconds, decoded as UTC)   Table 'F'   nil 'V'
//
// For convenience Encode also accepts int (sent as 'l') and map[string]any
// (sent as 'F'). These letters are RabbitMQ's, which differ from the 0-9-1
// spec's grammar ('s' is a signed 16-bit integer, 'x' a byte array, and there
// is no 'U' or 'L'); they are what amqp091-go and the other RabbitMQ clients
// send. Other letters, including 'U' and 'L', are rejected when decoding, as
// RabbitMQ rejects them.
//
// Keys are encoded in sorted order so the encoding is deterministic. An empty
// table decodes to nil.
type Table map[string]any

// Decimal is the 'D' field type: Value / 10^Scale.
type Decimal struct {
	Scale uint8
	Value int32
}

// maxNesting bounds how deep tables and arrays may nest, so hostile input
// cannot exhaust the stack and a table containing itself cannot loop forever.
const maxNesting = 32

// AppendTable appends t as a field table: a 32-bit byte length followed by
// the entries.
func AppendTable(dst []byte, t Table) ([]byte, error) {
	return appendTable(dst, t)
}

// ReadTable reads a field table from the start of b and reports how many
// bytes it took. Errors are *Error with CodeFrameError.
func ReadTable(b []byte) (Table, int, error) {
	d := decoder{buf: b, what: "field table"}
	t := d.table("")
	if err := d.finishPrefix(); err != nil {
		return nil, 0, err
	}
	return t, d.off, nil
}

// finishPrefix is finish for readers that may stop before the end of buf.
func (d *decoder) finishPrefix() error {
	if d.err != nil {
		return d.err
	}
	return nil
}

func appendTable(dst []byte, t Table) ([]byte, error) {
	return appendTableNested(dst, t, 0)
}

func appendTableNested(dst []byte, t map[string]any, depth int) ([]byte, error) {
	if depth > maxNesting {
		return dst, ErrNestingTooDeep
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // length, patched below
	if len(t) > 0 {
		var small [16]string
		keys := small[:0]
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var err error
		for _, k := range keys {
			if dst, err = appendShortstr(dst, k); err != nil {
				return dst, fmt.Errorf("table key %.32q...: %w", k, err)
			}
			if dst, err = appendFieldValue(dst, t[k], depth); err != nil {
				return dst, fmt.Errorf("table key %q: %w", k, err)
			}
		}
	}
	return patchLength(dst, start)
}

// patchLength writes the byte count after the 4-byte length at start into it.
func patchLength(dst []byte, start int) ([]byte, error) {
	n := len(dst) - start - 4
	if uint64(n) > math.MaxUint32 {
		return dst, fmt.Errorf("field table or array of %d bytes does not fit a 32-bit length", n)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	return dst, nil
}

func appendArray(dst []byte, a []any, depth int) ([]byte, error) {
	if depth > maxNesting {
		return dst, ErrNestingTooDeep
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var err error
	for i, v := range a {
		if dst, err = appendFieldValue(dst, v, depth); err != nil {
			return dst, fmt.Errorf("array element %d: %w", i, err)
		}
	}
	return patchLength(dst, start)
}

// appendFieldValue appends a type octet and the value.
func appendFieldValue(dst []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		return append(dst, 't', b), nil
	case int8:
		return append(dst, 'b', byte(v)), nil
	case uint8:
		return append(dst, 'B', v), nil
	case int16:
		return appendUint16(append(dst, 's'), uint16(v)), nil
	case uint16:
		return appendUint16(append(dst, 'u'), v), nil
	case int32:
		return appendUint32(append(dst, 'I'), uint32(v)), nil
	case uint32:
		return appendUint32(append(dst, 'i'), v), nil
	case int64:
		return appendUint64(append(dst, 'l'), uint64(v)), nil
	case int:
		return appendUint64(append(dst, 'l'), uint64(v)), nil
	case float32:
		return appendUint32(append(dst, 'f'), math.Float32bits(v)), nil
	case float64:
		return appendUint64(append(dst, 'd'), math.Float64bits(v)), nil
	case Decimal:
		return appendUint32(append(dst, 'D', v.Scale), uint32(v.Value)), nil
	case string:
		return appendLongstr(append(dst, 'S'), v)
	case []byte:
		if uint64(len(v)) > math.MaxUint32 {
			return dst, fmt.Errorf("byte array of %d bytes does not fit a 32-bit length", len(v))
		}
		return append(appendUint32(append(dst, 'x'), uint32(len(v))), v...), nil
	case []any:
		return appendArray(append(dst, 'A'), v, depth+1)
	case time.Time:
		return appendTimestamp(append(dst, 'T'), v), nil
	case Table:
		return appendTableNested(append(dst, 'F'), v, depth+1)
	case map[string]any:
		return appendTableNested(append(dst, 'F'), v, depth+1)
	case nil:
		return append(dst, 'V'), nil
	}
	return dst, fmt.Errorf("%w: %T", ErrUnsupportedValue, v)
}

// table reads a field table.
func (d *decoder) table(field string) Table {
	return d.tableNested(field, 0)
}

func (d *decoder) tableNested(field string, depth int) Table {
	if depth > maxNesting {
		d.fail(field, "field tables nested deeper than %d", maxNesting)
		return nil
	}
	body := d.take(uint64(d.uint32(field)), field)
	if d.err != nil || len(body) == 0 {
		return nil
	}
	// Read the entries from a decoder bounded to the table's bytes, sharing
	// the error reporting of the outer one.
	inner := decoder{buf: body, id: d.id, what: d.what}
	t := make(Table)
	for inner.off < len(inner.buf) && inner.err == nil {
		key := inner.shortstr("", field)
		v := inner.fieldValue(field, depth)
		if inner.err != nil {
			inner.err.Text += fmt.Sprintf(" (in table key %q)", key)
			break
		}
		t[key] = v
	}
	if inner.err != nil {
		d.err = inner.err
		return nil
	}
	return t
}

func (d *decoder) array(field string, depth int) []any {
	if depth > maxNesting {
		d.fail(field, "field arrays nested deeper than %d", maxNesting)
		return nil
	}
	body := d.take(uint64(d.uint32(field)), field)
	if d.err != nil || len(body) == 0 {
		return nil
	}
	inner := decoder{buf: body, id: d.id, what: d.what}
	var a []any
	for inner.off < len(inner.buf) && inner.err == nil {
		v := inner.fieldValue(field, depth)
		if inner.err != nil {
			inner.err.Text += fmt.Sprintf(" (in array element %d)", len(a))
			break
		}
		a = append(a, v)
	}
	if inner.err != nil {
		d.err = inner.err
		return nil
	}
	return a
}

// fieldValue reads a type octet and the value it announces.
func (d *decoder) fieldValue(field string, depth int) any {
	typ := d.octet(field)
	if d.err != nil {
		return nil
	}
	switch typ {
	case 't':
		return d.octet(field) != 0
	case 'b':
		return int8(d.octet(field))
	case 'B':
		return d.octet(field)
	case 's':
		return int16(d.uint16(field))
	case 'u':
		return d.uint16(field)
	case 'I':
		return int32(d.uint32(field))
	case 'i':
		return d.uint32(field)
	case 'l':
		return int64(d.uint64(field))
	case 'f':
		return math.Float32frombits(d.uint32(field))
	case 'd':
		return math.Float64frombits(d.uint64(field))
	case 'D':
		scale := d.octet(field)
		return Decimal{Scale: scale, Value: int32(d.uint32(field))}
	case 'S':
		return d.longstr("", field)
	case 'x':
		return d.bytes(field)
	case 'A':
		return d.array(field, depth+1)
	case 'T':
		return d.timestamp(field)
	case 'F':
		return d.tableNested(field, depth+1)
	case 'V':
		return nil
	}
	d.fail(field, "unknown field value type %q", rune(typ))
	return nil
}
