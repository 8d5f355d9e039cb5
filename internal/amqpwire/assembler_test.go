package amqpwire

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func methodFrame(t *testing.T, m Method) Frame {
	t.Helper()
	p, err := m.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	return Frame{Type: FrameMethod, Channel: 1, Payload: p}
}

func headerFrame(t *testing.T, class uint16, size uint64, props Properties) Frame {
	t.Helper()
	p, err := (&ContentHeader{ClassID: class, BodySize: size, Properties: props}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	return Frame{Type: FrameHeader, Channel: 1, Payload: p}
}

func bodyFrame(s string) Frame { return Frame{Type: FrameBody, Channel: 1, Payload: []byte(s)} }

func TestAssemblerMethodWithoutContent(t *testing.T) {
	var a Assembler
	cmd, done, err := a.Add(methodFrame(t, &QueueDeclare{Queue: "q"}))
	if err != nil || !done || cmd.Content != nil || cmd.Method.(*QueueDeclare).Queue != "q" {
		t.Fatalf("%+v %v %v", cmd, done, err)
	}
}

func TestAssemblerPublish(t *testing.T) {
	var a Assembler
	pub := &BasicPublish{Exchange: "e", RoutingKey: "k"}
	props := Properties{ContentType: "text/plain", Headers: Table{"x": int32(1)}}
	frames := []Frame{methodFrame(t, pub), headerFrame(t, 60, 11, props), bodyFrame("hello "), bodyFrame(""), bodyFrame("world")}

	// Reuse one payload buffer for every frame, as FrameReader does, to prove
	// the assembler keeps copies.
	scratch := make([]byte, 0, 256)
	var cmd Command
	for i, f := range frames {
		scratch = append(scratch[:0], f.Payload...)
		f.Payload = scratch
		c, done, err := a.Add(f)
		if err != nil {
			t.Fatal(err)
		}
		if done != (i == len(frames)-1) {
			t.Fatalf("frame %d complete=%v", i, done)
		}
		cmd = c
		for j := range scratch {
			scratch[j] = 0xAA
		}
	}
	if !reflect.DeepEqual(cmd.Method, pub) || string(cmd.Content.Body) != "hello world" {
		t.Fatalf("%+v %q", cmd.Method, cmd.Content.Body)
	}
	props.Present = FlagContentType | FlagHeaders
	if !reflect.DeepEqual(cmd.Content.Properties, props) {
		t.Fatalf("%+v", cmd.Content.Properties)
	}
	wantRaw, _ := props.Encode(nil)
	if !bytes.Equal(cmd.Content.RawProperties, wantRaw) {
		t.Fatalf("raw % x", cmd.Content.RawProperties)
	}

	// The assembler is ready for the next command.
	if _, done, err := a.Add(methodFrame(t, &BasicAck{})); !done || err != nil {
		t.Fatal(done, err)
	}
}

func TestAssemblerEmptyBodyCompletesOnHeader(t *testing.T) {
	var a Assembler
	a.Add(methodFrame(t, &BasicPublish{}))
	cmd, done, err := a.Add(headerFrame(t, 60, 0, Properties{}))
	if err != nil || !done || cmd.Content == nil || len(cmd.Content.Body) != 0 {
		t.Fatalf("%+v %v %v", cmd, done, err)
	}
}

func wantAMQPError(t *testing.T, err error, code uint16, hard bool, contains string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *Error", err)
	}
	if e.Code != code || e.Hard != hard || !strings.Contains(e.Text, contains) {
		t.Fatalf("got %+v, want code %d hard %v containing %q", e, code, hard, contains)
	}
	return e
}

func TestAssemblerOutOfOrderFrames(t *testing.T) {
	pub := methodFrame(t, &BasicPublish{})
	hdr := headerFrame(t, 60, 3, Properties{})
	cases := []struct {
		name     string
		frames   []Frame
		contains string
	}{
		{"header without method", []Frame{hdr}, "expected method frame, got content header frame"},
		{"body without method", []Frame{bodyFrame("x")}, "expected method frame, got content body frame"},
		{"body before header", []Frame{pub, bodyFrame("x")}, "expected content header for class 60, got content body frame"},
		{"method before header", []Frame{pub, pub}, "expected content header for class 60, got method frame"},
		{"method mid body", []Frame{pub, hdr, bodyFrame("x"), pub}, "expected content body, got method frame"},
		{"second header", []Frame{pub, hdr, hdr}, "expected content body, got content header frame"},
		{"header of other class", []Frame{pub, headerFrame(t, 50, 3, Properties{})}, "got one for class 50"},
		{"body too long", []Frame{pub, hdr, bodyFrame("ab"), bodyFrame("cd")}, "exceeds the 1 bytes left"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var a Assembler
			var err error
			for _, f := range c.frames {
				if _, _, err = a.Add(f); err != nil {
					break
				}
			}
			wantAMQPError(t, err, CodeUnexpectedFrame, true, c.contains)
			// After the error the assembler starts over.
			if _, done, err := a.Add(methodFrame(t, &BasicAck{})); !done || err != nil {
				t.Fatalf("after error: %v %v", done, err)
			}
		})
	}
}

func TestAssemblerMaxBodySize(t *testing.T) {
	a := Assembler{MaxBodySize: 10}
	a.Add(methodFrame(t, &BasicPublish{}))
	_, _, err := a.Add(headerFrame(t, 60, 11, Properties{}))
	e := wantAMQPError(t, err, CodePreconditionFailed, false, "message size 11 is larger than configured max size 10")
	if e.ClassID != 60 || e.MethodID != 40 {
		t.Fatalf("%+v", e)
	}
	if _, ok := e.CloseMethod().(*ChannelClose); !ok {
		t.Fatal("max body size should close the channel only")
	}
}

func TestAssemblerPassesDecodeErrorsThrough(t *testing.T) {
	var a Assembler
	_, _, err := a.Add(Frame{Type: FrameMethod, Payload: []byte{0, 60, 0, 40, 0}})
	wantAMQPError(t, err, CodeFrameError, true, "basic.publish")
	_, _, err = a.Add(Frame{Type: FrameMethod, Payload: []byte{0, 61, 0, 40}})
	wantAMQPError(t, err, CodeNotImplemented, true, "unknown method")
	a.Add(methodFrame(t, &BasicPublish{}))
	_, _, err = a.Add(Frame{Type: FrameHeader, Payload: []byte{0, 60}})
	if e := wantAMQPError(t, err, CodeFrameError, true, "content header"); e.ClassID != 60 || e.MethodID != 40 {
		t.Fatalf("header error not attributed to basic.publish: %+v", e)
	}
	if _, _, err := a.Add(Frame{Type: FrameHeartbeat}); err != nil {
		t.Fatal(err)
	}
}
