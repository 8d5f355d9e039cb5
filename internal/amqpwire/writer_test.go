package amqpwire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// readAll reads every frame in b.
func readAll(t *testing.T, b []byte) []Frame {
	t.Helper()
	r := bufio.NewReader(bytes.NewReader(b))
	var fs []Frame
	for {
		f, err := ReadFrame(r, 0)
		if err == io.EOF {
			return fs
		}
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
}

func TestWriteMethodFrame(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	if err := w.WriteMethod(3, &ChannelOpenOK{}); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 || w.Buffered() == 0 {
		t.Fatal("frame reached the connection before Flush")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := []byte{1, 0, 3, 0, 0, 0, 8, 0, 20, 0, 11, 0, 0, 0, 0, 0xce}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("% x", buf.Bytes())
	}
}

func TestWriteContentSplitsBodyAtFrameMax(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 1000) // 10000 bytes
	props := fullProperties()
	deliver := &BasicDeliver{ConsumerTag: "c", DeliveryTag: 42, RoutingKey: "rk"}

	var buf bytes.Buffer
	w := NewWriter(&buf, 512)
	w.SetFrameMax(FrameMinSize)
	if err := w.WriteContent(7, deliver, &props, body); err != nil {
		t.Fatal(err)
	}
	w.Flush()

	frames := readAll(t, buf.Bytes())
	// method, header, then 10000 bytes in bodies of at most 4088.
	if len(frames) != 5 {
		t.Fatalf("%d frames", len(frames))
	}
	for i, size := range []int{4088, 4088, 1824} {
		f := frames[2+i]
		if f.Type != FrameBody || f.Channel != 7 || len(f.Payload) != size {
			t.Fatalf("body frame %d: %v ch %d %d bytes", i, f.Type, f.Channel, len(f.Payload))
		}
	}

	var asm Assembler
	var cmd Command
	for i, f := range frames {
		c, done, err := asm.Add(f)
		if err != nil {
			t.Fatal(err)
		}
		if done != (i == len(frames)-1) {
			t.Fatalf("frame %d: complete=%v", i, done)
		}
		cmd = c
	}
	if !reflect.DeepEqual(cmd.Method, deliver) || !bytes.Equal(cmd.Content.Body, body) {
		t.Fatalf("method %+v body %d bytes", cmd.Method, len(cmd.Content.Body))
	}
	props.Present = 0xfffc
	if !reflect.DeepEqual(cmd.Content.Properties, props) {
		t.Fatalf("properties %+v", cmd.Content.Properties)
	}

	// Forwarding the raw properties produces the very same bytes.
	var raw bytes.Buffer
	w2 := NewWriter(&raw, 0)
	w2.SetFrameMax(FrameMinSize)
	if err := w2.WriteContentRaw(7, deliver, cmd.Content.RawProperties, body); err != nil {
		t.Fatal(err)
	}
	w2.Flush()
	if !bytes.Equal(raw.Bytes(), buf.Bytes()) {
		t.Fatal("WriteContentRaw differs from WriteContent")
	}
}

func TestWriteContentEmptyBodyAndNoProperties(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	if err := w.WriteContentRaw(1, &BasicPublish{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	frames := readAll(t, buf.Bytes())
	if len(frames) != 2 {
		t.Fatalf("%d frames, want method and header only", len(frames))
	}
	if want := []byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; !bytes.Equal(frames[1].Payload, want) {
		t.Fatalf("header % x", frames[1].Payload)
	}
}

// A method or header that does not fit frame-max, or cannot be encoded, is
// refused without writing anything, so the stream stays well-formed.
func TestWriterRefusesWithoutPartialWrites(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	w.SetFrameMax(FrameMinSize)
	big := Table{"h": strings.Repeat("x", 5000)}

	err := w.WriteMethod(1, &QueueDeclare{Arguments: big})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("method: %v", err)
	}
	err = w.WriteContent(1, &BasicDeliver{}, &Properties{Headers: big}, []byte("x"))
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("header: %v", err)
	}
	err = w.WriteContent(1, &BasicDeliver{ConsumerTag: strings.Repeat("c", 300)}, &Properties{}, nil)
	if !errors.Is(err, ErrShortstrTooLong) {
		t.Fatalf("encode: %v", err)
	}
	if err := w.WriteFrame(Frame{Type: FrameBody, Channel: 1, Payload: make([]byte, 4089)}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("frame: %v", err)
	}
	if w.Buffered() != 0 {
		t.Fatalf("%d bytes buffered after refusals", w.Buffered())
	}
	// The writer still works afterwards.
	if err := w.WriteMethod(1, &BasicAck{DeliveryTag: 1}); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if fs := readAll(t, buf.Bytes()); len(fs) != 1 {
		t.Fatalf("%d frames", len(fs))
	}
}

func TestSetFrameMaxBelowMinimumIsRaised(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	w.SetFrameMax(8) // would leave no room for body bytes
	if err := w.WriteContentRaw(1, &BasicDeliver{}, nil, make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if fs := readAll(t, buf.Bytes()); len(fs) != 4 {
		t.Fatalf("%d frames", len(fs))
	}
}

// The delivery hot path: with a reused method struct, writing a message
// allocates nothing.
func TestWriteContentRawDoesNotAllocate(t *testing.T) {
	w := NewWriter(io.Discard, 0)
	w.SetFrameMax(131072)
	props, _ := (&Properties{ContentType: "text/plain", DeliveryMode: 2}).Encode(nil)
	body := make([]byte, 300)
	deliver := &BasicDeliver{ConsumerTag: "ctag-1", Exchange: "amq.direct", RoutingKey: "work"}
	allocs := testing.AllocsPerRun(200, func() {
		deliver.DeliveryTag++
		if err := w.WriteContentRaw(1, deliver, props, body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per delivery", allocs)
	}
}
