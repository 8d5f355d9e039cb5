package amqpwire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// allMethods returns a zero value of every method the registry knows, found
// by asking NewMethod for every class and method id an octet can hold (all
// 0-9-1 ids are below 256).
func allMethods(t testing.TB) []Method {
	t.Helper()
	var ms []Method
	for c := range 256 {
		for m := range 256 {
			if meth := NewMethod(NewMethodID(uint16(c), uint16(m))); meth != nil {
				ms = append(ms, meth)
			}
		}
	}
	return ms
}

// fill sets every field of the struct v points to a random non-zero value.
func fill(rng *rand.Rand, v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(rng.Uint64() | 1) // odd, so non-zero after truncation too
		case reflect.String:
			n := 1 + rng.IntN(40)
			b := make([]byte, n)
			for j := range b {
				b[j] = byte('a' + rng.IntN(26))
			}
			f.SetString(string(b))
		case reflect.Map: // Table
			f.Set(reflect.ValueOf(Table{"k": int32(rng.Int32()), "s": "v"}))
		default:
			panic("fill: unhandled kind " + f.Kind().String())
		}
	}
}

func TestRegistryCoversTheSpec(t *testing.T) {
	ms := allMethods(t)
	perClass := map[uint16]int{}
	names := map[string]bool{}
	for _, m := range ms {
		perClass[m.ID().Class()]++
		if names[m.Name()] {
			t.Errorf("duplicate name %s", m.Name())
		}
		names[m.Name()] = true
		if got := MethodName(m.ID()); got != m.Name() {
			t.Errorf("MethodName(%d) = %q, want %q", m.ID(), got, m.Name())
		}
		if m.ID().String() != m.Name() {
			t.Errorf("MethodID.String = %q, want %q", m.ID().String(), m.Name())
		}
	}
	want := map[uint16]int{
		ClassConnection: 14, ClassChannel: 6, ClassAccess: 2, ClassExchange: 8,
		ClassQueue: 10, ClassBasic: 18, ClassConfirm: 2, ClassTx: 6,
	}
	if !reflect.DeepEqual(perClass, want) {
		t.Errorf("methods per class = %v, want %v", perClass, want)
	}
	for _, name := range []string{"access.request", "access.request-ok", "confirm.select", "basic.nack",
		"exchange.bind", "connection.update-secret", "connection.blocked", "basic.recover-async"} {
		if !names[name] {
			t.Errorf("missing %s", name)
		}
	}
}

func TestHasContentOnlyForMessageCarryingMethods(t *testing.T) {
	withContent := map[MethodID]bool{
		BasicPublishID: true, BasicReturnID: true, BasicDeliverID: true, BasicGetOKID: true,
	}
	for _, m := range allMethods(t) {
		if m.HasContent() != withContent[m.ID()] {
			t.Errorf("%s HasContent = %v", m.Name(), m.HasContent())
		}
	}
	if !(&QueueDeclare{}).Synchronous() || (&BasicPublish{}).Synchronous() || (&BasicAck{}).Synchronous() {
		t.Error("Synchronous does not follow the spec")
	}
}

func TestEveryMethodRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, zero := range allMethods(t) {
		t.Run(zero.Name(), func(t *testing.T) {
			for range 5 {
				m := NewMethod(zero.ID())
				fill(rng, reflect.ValueOf(m).Elem())
				payload, err := m.Encode(nil)
				if err != nil {
					t.Fatal(err)
				}
				if id, err := PeekMethodID(payload); err != nil || id != m.ID() {
					t.Fatalf("PeekMethodID = %v, %v", id, err)
				}

				got, err := DecodeMethod(payload)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, m) {
					t.Fatalf("DecodeMethod = %+v, want %+v", got, m)
				}

				into := NewMethod(zero.ID())
				if err := into.Decode(payload); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(into, m) {
					t.Fatalf("Decode = %+v, want %+v", into, m)
				}

				// The zero value round trips too (empty strings, nil table, false bits).
				empty := NewMethod(zero.ID())
				p0, err := empty.Encode(nil)
				if err != nil {
					t.Fatal(err)
				}
				back, err := DecodeMethod(p0)
				if err != nil || !reflect.DeepEqual(back, empty) {
					t.Fatalf("zero value: %+v, %v", back, err)
				}
			}
		})
	}
}

// Every strict prefix of a valid payload, and the payload plus a trailing
// byte, must fail with a FRAME_ERROR naming the method, never panic.
func TestTruncatedAndTrailingMethodPayloadsFail(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, m := range allMethods(t) {
		fill(rng, reflect.ValueOf(m).Elem())
		payload, err := m.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(payload) {
			_, err := DecodeMethod(payload[:n])
			checkFrameError(t, err, m.Name(), n)
			if n >= 4 {
				checkFrameError(t, NewMethod(m.ID()).Decode(payload[:n]), m.Name(), n)
			}
		}
		_, err = DecodeMethod(append(payload, 0))
		checkFrameError(t, err, m.Name(), -1)
		if err != nil && !strings.Contains(err.Error(), "trailing") {
			t.Errorf("%s: trailing byte error %q does not say so", m.Name(), err)
		}
	}
}

func checkFrameError(t *testing.T, err error, name string, n int) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s prefix %d: error %v is not *Error", name, n, err)
	}
	if e.Code != CodeFrameError || !e.Hard {
		t.Fatalf("%s prefix %d: %+v, want hard FRAME_ERROR", name, n, e)
	}
	if n >= 4 && !strings.Contains(e.Text, name) {
		t.Fatalf("%s prefix %d: text %q does not name the method", name, n, e.Text)
	}
}

func TestDecodeIntoWrongMethodFails(t *testing.T) {
	payload, _ := (&BasicAck{DeliveryTag: 1}).Encode(nil)
	var nack BasicNack
	err := nack.Decode(payload)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeFrameError || !strings.Contains(e.Text, "basic.ack") {
		t.Fatalf("err = %v", err)
	}
}

func TestUnknownMethodIsNotImplemented(t *testing.T) {
	_, err := DecodeMethod([]byte{0, 60, 0, 99})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeNotImplemented || !e.Hard || e.ClassID != 60 || e.MethodID != 99 {
		t.Fatalf("err = %#v", err)
	}
}

// Encodings worked out by hand from the spec's field lists.
func TestMethodEncodingsByteExact(t *testing.T) {
	cases := []struct {
		m    Method
		want []byte
	}{
		{&QueueDeclare{Queue: "q", Durable: true},
			[]byte{0, 50, 0, 10, 0, 0, 1, 'q', 0b00010, 0, 0, 0, 0}},
		{&QueueDeclare{Passive: true, Exclusive: true, AutoDelete: true, NoWait: true},
			[]byte{0, 50, 0, 10, 0, 0, 0, 0b11101, 0, 0, 0, 0}},
		{&ExchangeDeclare{Exchange: "x", Type: "topic", Durable: true, Internal: true},
			[]byte{0, 40, 0, 10, 0, 0, 1, 'x', 5, 't', 'o', 'p', 'i', 'c', 0b01010, 0, 0, 0, 0}},
		{&BasicPublish{Exchange: "ex", RoutingKey: "rk", Mandatory: true},
			[]byte{0, 60, 0, 40, 0, 0, 2, 'e', 'x', 2, 'r', 'k', 0b01}},
		{&BasicPublish{Immediate: true},
			[]byte{0, 60, 0, 40, 0, 0, 0, 0, 0b10}},
		{&BasicDeliver{ConsumerTag: "ct", DeliveryTag: 0x0102030405060708, Redelivered: true, RoutingKey: "q"},
			[]byte{0, 60, 0, 60, 2, 'c', 't', 1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 1, 'q'}},
		{&BasicNack{DeliveryTag: 9, Multiple: true, Requeue: true},
			[]byte{0, 60, 0, 120, 0, 0, 0, 0, 0, 0, 0, 9, 0b11}},
		{&BasicGetOK{DeliveryTag: 1, Exchange: "e", RoutingKey: "r", MessageCount: 7},
			[]byte{0, 60, 0, 71, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 'e', 1, 'r', 0, 0, 0, 7}},
		{&ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60},
			[]byte{0, 10, 0, 30, 0x07, 0xff, 0, 2, 0, 0, 0, 60}},
		{&ConnectionOpen{VirtualHost: "/", Reserved2: true},
			[]byte{0, 10, 0, 40, 1, '/', 0, 1}},
		{&ConnectionClose{ReplyCode: 320, ReplyText: "bye", ClassID: 0, MethodID: 0},
			[]byte{0, 10, 0, 50, 0x01, 0x40, 3, 'b', 'y', 'e', 0, 0, 0, 0}},
		{&ConnectionStartOK{Mechanism: "PLAIN", Response: "\x00u\x00p", Locale: "en_US"},
			[]byte{0, 10, 0, 11, 0, 0, 0, 0, 5, 'P', 'L', 'A', 'I', 'N', 0, 0, 0, 4, 0, 'u', 0, 'p', 5, 'e', 'n', '_', 'U', 'S'}},
		{&ChannelOpenOK{}, []byte{0, 20, 0, 11, 0, 0, 0, 0}},
		{&ConfirmSelect{NoWait: true}, []byte{0, 85, 0, 10, 1}},
		{&TxCommit{}, []byte{0, 90, 0, 20}},
		{&AccessRequest{Realm: "/data", Passive: true, Active: true, Write: true, Read: true},
			[]byte{0, 30, 0, 10, 5, '/', 'd', 'a', 't', 'a', 0b11110}},
		{&AccessRequestOK{Ticket: 1}, []byte{0, 30, 0, 11, 0, 1}},
	}
	for _, c := range cases {
		got, err := c.m.Encode(nil)
		if err != nil {
			t.Fatalf("%s: %v", c.m.Name(), err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s:\n got % x\nwant % x", c.m.Name(), got, c.want)
		}
		back, err := DecodeMethod(c.want)
		if err != nil || !reflect.DeepEqual(back, c.m) {
			t.Errorf("%s: decoded %+v, %v", c.m.Name(), back, err)
		}
	}
}

// Bits beyond the defined ones are ignored on decode, as RabbitMQ does.
func TestUndefinedBitsIgnored(t *testing.T) {
	m, err := DecodeMethod([]byte{0, 60, 0, 40, 0, 0, 0, 0, 0b11111101})
	if err != nil {
		t.Fatal(err)
	}
	if p := m.(*BasicPublish); !p.Mandatory || p.Immediate {
		t.Fatalf("%+v", p)
	}
}

func TestEncodeRejectsLongShortString(t *testing.T) {
	long := strings.Repeat("x", 256)
	_, err := (&QueueDeclare{Queue: long}).Encode(nil)
	if !errors.Is(err, ErrShortstrTooLong) || !strings.Contains(err.Error(), "queue.declare field queue") {
		t.Fatalf("err = %v", err)
	}
	if _, err := (&QueueDeclare{Queue: long[:255]}).Encode(nil); err != nil {
		t.Fatalf("255 bytes: %v", err)
	}
	_, err = (&QueueDeclare{Arguments: Table{"bad": struct{}{}}}).Encode(nil)
	if !errors.Is(err, ErrUnsupportedValue) {
		t.Fatalf("err = %v", err)
	}
}

// Decoding into a struct that already holds the same strings keeps them, so
// a reused basic.publish decodes without allocating.
func TestDecodeReusesEqualStrings(t *testing.T) {
	payload, _ := (&BasicPublish{Exchange: "amq.topic", RoutingKey: "a.b.c"}).Encode(nil)
	var p BasicPublish
	if err := p.Decode(payload); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.Decode(payload); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("reused decode allocates %v times", allocs)
	}
	if p.Exchange != "amq.topic" || p.RoutingKey != "a.b.c" {
		t.Fatalf("%+v", p)
	}
}

func TestMethodIDParts(t *testing.T) {
	id := NewMethodID(60, 40)
	if id != BasicPublishID || id.Class() != 60 || id.Method() != 40 {
		t.Fatal(id)
	}
	if s := NewMethodID(7, 8).String(); s != "method 7.8" {
		t.Fatal(s)
	}
}
