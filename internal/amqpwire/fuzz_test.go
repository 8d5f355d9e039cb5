package amqpwire

import (
	"bufio"
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

// The fuzz targets check that no input panics, that every failure is a
// protocol *Error (or an EOF), and that whatever decodes re-encodes into
// bytes that decode to the same thing and encode identically again
// (decode -> encode -> decode is stable). Run one with e.g.
//
//	go test -run '^$' -fuzz FuzzDecodeMethod -fuzztime 30s ./internal/amqpwire

func FuzzDecodeMethod(f *testing.F) {
	for _, m := range seedMethods() {
		p, _ := m.Encode(nil)
		f.Add(p)
	}
	f.Add([]byte{0, 60, 0, 40})
	f.Add([]byte{0, 99, 0, 1})
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, err := DecodeMethod(payload)
		if err != nil {
			mustBeProtocolError(t, err)
			return
		}
		enc, err := m.Encode(nil)
		if err != nil {
			t.Fatalf("decoded %s does not encode: %v", m.Name(), err)
		}
		m2, err := DecodeMethod(enc)
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", m.Name(), err)
		}
		enc2, _ := m2.Encode(nil)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("%s not stable:\n% x\n% x", m.Name(), enc, enc2)
		}
		// Decode into the typed struct agrees with the registry.
		typed := NewMethod(m.ID())
		if err := typed.Decode(payload); err != nil {
			t.Fatalf("typed Decode fails where DecodeMethod succeeded: %v", err)
		}
		if enc3, _ := typed.Encode(nil); !bytes.Equal(enc3, enc) {
			t.Fatal("typed Decode differs from DecodeMethod")
		}
	})
}

func FuzzReadTable(f *testing.F) {
	for _, c := range fieldEncodings {
		f.Add(oneEntryTable(c.wire))
	}
	all := Table{}
	for _, c := range fieldEncodings {
		all[c.name] = c.value
	}
	enc, _ := AppendTable(nil, all)
	f.Add(enc)
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, n, err := ReadTable(b)
		if err != nil {
			mustBeProtocolError(t, err)
			return
		}
		if n < 4 || n > len(b) {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		enc, err := AppendTable(nil, tab)
		if err != nil {
			t.Fatalf("decoded table does not encode: %v", err)
		}
		tab2, n2, err := ReadTable(enc)
		if err != nil || n2 != len(enc) {
			t.Fatalf("re-encoded table: n=%d/%d err=%v", n2, len(enc), err)
		}
		if enc2, _ := AppendTable(nil, tab2); !bytes.Equal(enc, enc2) {
			t.Fatalf("not stable:\n% x\n% x", enc, enc2)
		}
	})
}

func FuzzContentHeader(f *testing.F) {
	full := ContentHeader{ClassID: 60, BodySize: 123, Properties: fullProperties()}
	enc, _ := full.Encode(nil)
	f.Add(enc)
	f.Add([]byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0})
	f.Add([]byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0x80, 1, 0, 0, 1, 'x'})
	f.Fuzz(func(t *testing.T, payload []byte) {
		var h ContentHeader
		if err := h.Decode(payload); err != nil {
			mustBeProtocolError(t, err)
			return
		}
		enc, err := h.Encode(nil)
		if err != nil {
			t.Fatalf("decoded header does not encode: %v", err)
		}
		var h2 ContentHeader
		if err := h2.Decode(enc); err != nil {
			t.Fatalf("re-encoded header does not decode: %v", err)
		}
		enc2, _ := h2.Encode(nil)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("not stable:\n% x\n% x", enc, enc2)
		}
		if h2.Properties.Present != h.Properties.Present || h2.BodySize != h.BodySize || h2.ClassID != h.ClassID {
			t.Fatalf("fields changed: %+v vs %+v", h, h2)
		}
		if !timesEqual(h.Properties.Timestamp, h2.Properties.Timestamp) {
			t.Fatal("timestamp changed")
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	method, _ := (&BasicPublish{Exchange: "e", RoutingKey: "k"}).Encode(nil)
	header, _ := (&ContentHeader{ClassID: 60, BodySize: 3}).Encode(nil)
	var stream []byte
	stream = append(stream, frameBytes(1, 1, method, FrameEnd)...)
	stream = append(stream, frameBytes(2, 1, header, FrameEnd)...)
	stream = append(stream, frameBytes(3, 1, []byte("abc"), FrameEnd)...)
	stream = append(stream, frameBytes(8, 0, nil, FrameEnd)...)
	f.Add(stream, uint32(0))
	f.Add(stream, uint32(4096))
	f.Add(frameBytes(3, 1, make([]byte, 100), 0), uint32(0))
	f.Add(frameBytes(8, 2, nil, FrameEnd), uint32(0))
	f.Fuzz(func(t *testing.T, in []byte, frameMax uint32) {
		plain := bufio.NewReaderSize(bytes.NewReader(in), 16)
		fr := NewFrameReader(bufio.NewReaderSize(bytes.NewReader(in), 64), frameMax)
		var rewritten bytes.Buffer
		consumed := 0
		for {
			a, errA := ReadFrame(plain, frameMax)
			b, errB := fr.ReadFrame()
			if (errA == nil) != (errB == nil) {
				t.Fatalf("ReadFrame err %v, FrameReader err %v", errA, errB)
			}
			if errA != nil {
				if !errors.Is(errA, errB) && errA.Error() != errB.Error() {
					t.Fatalf("different errors: %v / %v", errA, errB)
				}
				mustBeProtocolError(t, errA)
				break
			}
			if a.Type != b.Type || a.Channel != b.Channel || !bytes.Equal(a.Payload, b.Payload) {
				t.Fatal("ReadFrame and FrameReader disagree")
			}
			if frameMax != 0 && len(a.Payload)+FrameOverhead > int(frameMax) {
				t.Fatalf("frame of %d bytes passed frame-max %d", len(a.Payload)+FrameOverhead, frameMax)
			}
			consumed += len(a.Payload) + FrameOverhead
			if err := WriteFrame(&rewritten, a); err != nil {
				t.Fatal(err)
			}
		}
		// Every frame read writes back as the bytes it was read from.
		if !bytes.Equal(rewritten.Bytes(), in[:consumed]) {
			t.Fatal("rewritten frames differ from the input")
		}
	})
}

// mustBeProtocolError fails unless err is what a peer's bad bytes may cause:
// an *Error with a reply code, or running out of input.
func mustBeProtocolError(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if errors.As(err, &e) {
		if e.Code == 0 || e.Text == "" || !e.Hard {
			t.Fatalf("malformed *Error %+v", e)
		}
		return
	}
	if err.Error() == "EOF" || err.Error() == "unexpected EOF" {
		return
	}
	t.Fatalf("unexpected error type %T: %v", err, err)
}

func timesEqual(a, b time.Time) bool { return a.Equal(b) }

// seedMethods returns one filled instance of every method.
func seedMethods() []Method {
	var ms []Method
	for c := range 256 {
		for m := range 256 {
			meth := NewMethod(NewMethodID(uint16(c), uint16(m)))
			if meth == nil {
				continue
			}
			v := reflect.ValueOf(meth).Elem()
			for i := range v.NumField() {
				switch f := v.Field(i); f.Kind() {
				case reflect.Bool:
					f.SetBool(i%2 == 0)
				case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
					f.SetUint(uint64(i + 1))
				case reflect.String:
					f.SetString("s")
				case reflect.Map:
					f.Set(reflect.ValueOf(Table{"a": []any{int8(1), Table{"b": nil}}}))
				}
			}
			ms = append(ms, meth)
		}
	}
	return ms
}
