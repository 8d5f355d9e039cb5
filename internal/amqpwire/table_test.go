package amqpwire

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Each value type in a one-entry table with key "k", encoded by hand from
// the grammar: table size, key as short string, type octet, value.
var fieldEncodings = []struct {
	name  string
	value any
	wire  []byte // type octet and value
}{
	{"bool true", true, []byte{'t', 1}},
	{"bool false", false, []byte{'t', 0}},
	{"int8", int8(-2), []byte{'b', 0xfe}},
	{"uint8", uint8(200), []byte{'B', 200}},
	{"int16", int16(-2), []byte{'s', 0xff, 0xfe}},
	{"uint16", uint16(0xabcd), []byte{'u', 0xab, 0xcd}},
	{"int32", int32(-3), []byte{'I', 0xff, 0xff, 0xff, 0xfd}},
	{"uint32", uint32(0xdeadbeef), []byte{'i', 0xde, 0xad, 0xbe, 0xef}},
	{"int64", int64(-1), []byte{'l', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	{"float32", float32(1.5), []byte{'f', 0x3f, 0xc0, 0, 0}},
	{"float64", float64(-2.5), []byte{'d', 0xc0, 0x04, 0, 0, 0, 0, 0, 0}},
	{"decimal", Decimal{Scale: 2, Value: 12345}, []byte{'D', 2, 0, 0, 0x30, 0x39}},
	{"long string", "hi", []byte{'S', 0, 0, 0, 2, 'h', 'i'}},
	{"byte array", []byte{1, 2, 3}, []byte{'x', 0, 0, 0, 3, 1, 2, 3}},
	{"array", []any{int32(1), "a"}, []byte{'A', 0, 0, 0, 11, 'I', 0, 0, 0, 1, 'S', 0, 0, 0, 1, 'a'}},
	{"empty array", []any(nil), []byte{'A', 0, 0, 0, 0}},
	{"timestamp", time.Unix(0x01020304, 0).UTC(), []byte{'T', 0, 0, 0, 0, 1, 2, 3, 4}},
	{"nested table", Table{"n": true}, []byte{'F', 0, 0, 0, 4, 1, 'n', 't', 1}},
	{"void", nil, []byte{'V'}},
}

func oneEntryTable(wire []byte) []byte {
	body := append([]byte{1, 'k'}, wire...)
	return append([]byte{0, 0, 0, byte(len(body))}, body...)
}

func TestFieldValuesByteExact(t *testing.T) {
	for _, c := range fieldEncodings {
		t.Run(c.name, func(t *testing.T) {
			want := oneEntryTable(c.wire)
			got, err := AppendTable(nil, Table{"k": c.value})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encode:\n got % x\nwant % x", got, want)
			}
			back, n, err := ReadTable(want)
			if err != nil || n != len(want) {
				t.Fatalf("ReadTable: n=%d err=%v", n, err)
			}
			if !reflect.DeepEqual(back["k"], c.value) {
				t.Fatalf("decoded %#v (%T), want %#v (%T)", back["k"], back["k"], c.value, c.value)
			}
		})
	}
}

// The convenience Go types encode as RabbitMQ would expect and decode to the
// canonical ones.
func TestConvenienceTypes(t *testing.T) {
	got, err := AppendTable(nil, Table{"k": 7})
	if err != nil || !bytes.Equal(got, oneEntryTable([]byte{'l', 0, 0, 0, 0, 0, 0, 0, 7})) {
		t.Fatalf("int: % x %v", got, err)
	}
	got, err = AppendTable(nil, Table{"k": map[string]any{"n": true}})
	if err != nil || !bytes.Equal(got, oneEntryTable([]byte{'F', 0, 0, 0, 4, 1, 'n', 't', 1})) {
		t.Fatalf("map: % x %v", got, err)
	}
	// Sub-second precision is dropped and the zone does not matter.
	ts := time.Date(2024, 5, 6, 7, 8, 9, 999, time.FixedZone("X", 3600))
	got, _ = AppendTable(nil, Table{"k": ts})
	back, _, _ := ReadTable(got)
	if !back["k"].(time.Time).Equal(ts.Truncate(time.Second)) || back["k"].(time.Time).Location() != time.UTC {
		t.Fatalf("timestamp %v", back["k"])
	}
}

func TestTableWithEveryTypeRoundTrips(t *testing.T) {
	in := Table{}
	for _, c := range fieldEncodings {
		in[c.name] = c.value
	}
	in["deep"] = Table{"arr": []any{Table{"x": []byte("y")}, []any{nil, false}, Decimal{1, -1}}}
	in["nan"] = math.NaN()
	enc, err := AppendTable([]byte("prefix"), in)
	if err != nil {
		t.Fatal(err)
	}
	enc = enc[len("prefix"):]
	out, n, err := ReadTable(append(enc, "suffix"...))
	if err != nil || n != len(enc) {
		t.Fatalf("n=%d len=%d err=%v", n, len(enc), err)
	}
	if !math.IsNaN(out["nan"].(float64)) {
		t.Fatal("NaN lost")
	}
	delete(in, "nan")
	delete(out, "nan")
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", out, in)
	}
}

func TestTableKeysSortedSoEncodingIsDeterministic(t *testing.T) {
	tab := Table{}
	for _, k := range []string{"zeta", "alpha", "mu", "beta", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n"} {
		tab[k] = true
	}
	first, _ := AppendTable(nil, tab)
	for range 20 {
		again, _ := AppendTable(nil, tab)
		if !bytes.Equal(first, again) {
			t.Fatal("encoding differs between runs")
		}
	}
	if !bytes.HasPrefix(first[4:], []byte{1, 'a', 't', 1, 5, 'a', 'l', 'p', 'h', 'a'}) {
		t.Fatalf("keys not sorted: % x", first[:16])
	}
}

func TestEmptyAndNilTables(t *testing.T) {
	for _, tab := range []Table{nil, {}} {
		enc, err := AppendTable(nil, tab)
		if err != nil || !bytes.Equal(enc, []byte{0, 0, 0, 0}) {
			t.Fatalf("% x %v", enc, err)
		}
	}
	back, n, err := ReadTable([]byte{0, 0, 0, 0})
	if back != nil || n != 4 || err != nil {
		t.Fatalf("%v %d %v", back, n, err)
	}
}

func TestReadTableRejectsGarbage(t *testing.T) {
	cases := map[string][]byte{
		"U is not RabbitMQ's":  oneEntryTable([]byte{'U', 0, 1}),
		"L is not RabbitMQ's":  oneEntryTable([]byte{'L', 0, 0, 0, 0, 0, 0, 0, 1}),
		"unknown letter":       oneEntryTable([]byte{'?'}),
		"size past the end":    {0, 0, 0, 9, 1, 'k', 'V'},
		"value past its table": {0, 0, 0, 4, 1, 'k', 'I', 0, 0, 0, 0},
		"array past its size":  oneEntryTable([]byte{'A', 0, 0, 0, 2, 'I', 0, 0, 0, 1}),
		"key past the end":     {0, 0, 0, 2, 5, 'k'},
	}
	for name, b := range cases {
		_, _, err := ReadTable(b)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeFrameError {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	_, _, err := ReadTable(oneEntryTable([]byte{'U', 0, 1}))
	if !strings.Contains(err.Error(), `'U'`) || !strings.Contains(err.Error(), `table key "k"`) {
		t.Errorf("error does not point at the value: %v", err)
	}
}

func TestEveryTablePrefixFails(t *testing.T) {
	in := Table{}
	for _, c := range fieldEncodings {
		in[c.name] = c.value
	}
	enc, _ := AppendTable(nil, in)
	for n := range len(enc) {
		if _, _, err := ReadTable(enc[:n]); err == nil {
			t.Fatalf("prefix %d decoded", n)
		}
	}
}

func TestNestingLimit(t *testing.T) {
	deep := func(levels int) Table {
		tab := Table{}
		for range levels {
			tab = Table{"t": tab}
		}
		return tab
	}
	enc, err := AppendTable(nil, deep(maxNesting))
	if err != nil {
		t.Fatalf("%d levels: %v", maxNesting, err)
	}
	if _, _, err := ReadTable(enc); err != nil {
		t.Fatalf("%d levels: %v", maxNesting, err)
	}
	if _, err := AppendTable(nil, deep(maxNesting+1)); !errors.Is(err, ErrNestingTooDeep) {
		t.Fatalf("encode: %v", err)
	}

	// A table holding itself must not recurse forever.
	self := Table{}
	self["me"] = self
	if _, err := AppendTable(nil, self); !errors.Is(err, ErrNestingTooDeep) {
		t.Fatalf("self: %v", err)
	}

	// Hand-built input nested past the limit is refused, not a stack overflow.
	var b []byte
	for range 10000 {
		b = append([]byte{'A', byte(len(b) >> 24), byte(len(b) >> 16), byte(len(b) >> 8), byte(len(b))}, b...)
	}
	if _, _, err := ReadTable(oneEntryTableLong(b)); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Fatalf("deep input: %v", err)
	}
}

func oneEntryTableLong(wire []byte) []byte {
	body := append([]byte{1, 'k'}, wire...)
	return append(appendUint32(nil, uint32(len(body))), body...)
}

func TestTableKeyTooLong(t *testing.T) {
	_, err := AppendTable(nil, Table{strings.Repeat("k", 256): true})
	if !errors.Is(err, ErrShortstrTooLong) {
		t.Fatalf("err = %v", err)
	}
}
