package amqpwire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func fullProperties() Properties {
	return Properties{
		ContentType:     "application/json",
		ContentEncoding: "gzip",
		Headers:         Table{"h": int32(1)},
		DeliveryMode:    2,
		Priority:        9,
		CorrelationID:   "corr",
		ReplyTo:         "reply",
		Expiration:      "60000",
		MessageID:       "mid",
		Timestamp:       time.Unix(1700000000, 0).UTC(),
		Type:            "type",
		UserID:          "guest",
		AppID:           "app",
		ClusterID:       "cluster",
	}
}

func TestPropertyFlagsFollowTheSpecOrder(t *testing.T) {
	p := fullProperties()
	if f := p.Flags(); f != 0xfffc {
		t.Fatalf("all 14 properties: flags %#04x, want 0xfffc", uint16(f))
	}
	p = Properties{ContentType: "text/plain", DeliveryMode: 2}
	if f := p.Flags(); f != 0x9000 {
		t.Fatalf("content-type + delivery-mode: %#04x, want 0x9000", uint16(f))
	}
	if FlagClusterID != 1<<2 || FlagTimestamp != 1<<6 || FlagHeaders != 1<<13 {
		t.Fatal("flag bit positions")
	}
}

// content-type "t", delivery-mode 2, priority 0 present, timestamp 1:
// flags 1001 1000 0100 0000 = 0x9840.
func TestPropertiesByteExact(t *testing.T) {
	p := Properties{ContentType: "t", DeliveryMode: 2, Timestamp: time.Unix(1, 0), Present: FlagPriority}
	want := []byte{0x98, 0x40, 1, 't', 2, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	got, err := p.Encode(nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("got % x, %v\nwant % x", got, err, want)
	}
	var back Properties
	if err := back.Decode(want); err != nil {
		t.Fatal(err)
	}
	if back.Present != 0x9840 || back.Priority != 0 || back.DeliveryMode != 2 || back.ContentType != "t" || back.Timestamp.Unix() != 1 {
		t.Fatalf("%+v", back)
	}
	// Re-encoding keeps priority 0 on the wire.
	again, _ := back.Encode(nil)
	if !bytes.Equal(again, want) {
		t.Fatalf("re-encode % x", again)
	}
}

func TestContentHeaderRoundTrip(t *testing.T) {
	h := ContentHeader{ClassID: ClassBasic, BodySize: 1 << 40, Properties: fullProperties()}
	enc, err := h.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	var back ContentHeader
	if err := back.Decode(enc); err != nil {
		t.Fatal(err)
	}
	h.Properties.Present = 0xfffc
	if !reflect.DeepEqual(back, h) {
		t.Fatalf("got %+v\nwant %+v", back, h)
	}
	for n := range len(enc) {
		var x ContentHeader
		err := x.Decode(enc[:n])
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeFrameError {
			t.Fatalf("prefix %d: %v", n, err)
		}
	}
	if err := back.Decode(append(enc, 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

func TestContentHeaderByteExact(t *testing.T) {
	h := ContentHeader{ClassID: 60, BodySize: 5}
	want := []byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0}
	got, _ := h.Encode(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("% x", got)
	}
}

// Decoding replaces everything, so a reused Properties does not keep fields
// of the previous message.
func TestPropertiesDecodeResets(t *testing.T) {
	p := fullProperties()
	if err := p.Decode([]byte{0x80, 0, 1, 'x'}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, Properties{ContentType: "x", Present: FlagContentType}) {
		t.Fatalf("%+v", p)
	}
}

func TestPropertyFlagWords(t *testing.T) {
	var p Properties
	// A continuation word with nothing in it is harmless.
	if err := p.Decode([]byte{0x80, 0x01, 0x00, 0x00, 1, 'x'}); err != nil || p.ContentType != "x" {
		t.Fatalf("continuation: %+v %v", p, err)
	}
	bad := map[string][]byte{
		"bit 1 is no property":          {0x00, 0x02},
		"continuation names a property": {0x00, 0x01, 0x80, 0x00},
		"continuation word missing":     {0x00, 0x01},
		"flag set but property missing": {0x80, 0x00},
		"headers table truncated":       {0x20, 0x00, 0, 0, 0, 5, 1},
	}
	for name, b := range bad {
		if err := p.Decode(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestPropertiesEncodeErrors(t *testing.T) {
	p := Properties{MessageID: string(make([]byte, 256))}
	if _, err := p.Encode(nil); !errors.Is(err, ErrShortstrTooLong) {
		t.Fatalf("err = %v", err)
	}
	p = Properties{Headers: Table{"x": make(chan int)}}
	if _, err := p.Encode(nil); !errors.Is(err, ErrUnsupportedValue) {
		t.Fatalf("err = %v", err)
	}
}
