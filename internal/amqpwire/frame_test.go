package amqpwire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func frameBytes(typ byte, channel uint16, payload []byte, end byte) []byte {
	b := []byte{typ, byte(channel >> 8), byte(channel)}
	b = appendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return append(b, end)
}

func reader(b []byte, size int) *bufio.Reader {
	return bufio.NewReaderSize(bytes.NewReader(b), size)
}

func TestReadFrameEachType(t *testing.T) {
	method, _ := (&ChannelOpen{}).Encode(nil)
	header, _ := (&ContentHeader{ClassID: 60, BodySize: 3}).Encode(nil)
	want := []Frame{
		{FrameMethod, 1, method},
		{FrameHeader, 1, header},
		{FrameBody, 1, []byte("abc")},
		{FrameHeartbeat, 0, nil},
	}
	var stream []byte
	for _, f := range want {
		stream = frameBytes(byte(f.Type), f.Channel, f.Payload, FrameEnd)
		r := reader(stream, 4096)
		got, err := ReadFrame(r, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, f) {
			t.Fatalf("got %+v want %+v", got, f)
		}
		if _, err := ReadFrame(r, 0); err != io.EOF {
			t.Fatalf("after last frame: %v, want io.EOF", err)
		}
	}
}

// Hand-assembled: type 1, channel 0x0102, size 4, payload, 0xCE.
func TestWriteFrameByteExact(t *testing.T) {
	want := []byte{1, 1, 2, 0, 0, 0, 4, 0, 20, 0, 10, 0xce}
	f := Frame{Type: FrameMethod, Channel: 0x0102, Payload: []byte{0, 20, 0, 10}}

	var plain bytes.Buffer
	if err := WriteFrame(&plain, f); err != nil || !bytes.Equal(plain.Bytes(), want) {
		t.Fatalf("io.Writer: % x %v", plain.Bytes(), err)
	}
	var buffered bytes.Buffer
	bw := bufio.NewWriter(&buffered)
	if err := WriteFrame(bw, f); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	if !bytes.Equal(buffered.Bytes(), want) {
		t.Fatalf("bufio: % x", buffered.Bytes())
	}
}

func TestHeartbeatByteExact(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	if err := w.WriteHeartbeat(); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if want := []byte{8, 0, 0, 0, 0, 0, 0, 0xce}; !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("% x", buf.Bytes())
	}
}

func frameErr(t *testing.T, err error, contains string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeFrameError || !e.Hard {
		t.Fatalf("err = %v, want hard FRAME_ERROR", err)
	}
	if !strings.Contains(e.Text, contains) {
		t.Fatalf("text %q does not contain %q", e.Text, contains)
	}
	return e
}

func TestMalformedFrames(t *testing.T) {
	cases := []struct {
		name     string
		in       []byte
		frameMax uint32
		contains string
	}{
		{"bad frame end", frameBytes(1, 0, []byte{0, 10, 0, 51}, 0x00), 0, "frame-end"},
		{"unknown type", frameBytes(4, 0, nil, FrameEnd), 0, "unknown frame type 4"},
		{"heartbeat on channel 1", frameBytes(8, 1, nil, FrameEnd), 0, "channel 1"},
		{"heartbeat with payload", frameBytes(8, 0, []byte{1}, FrameEnd), 0, "payload"},
		{"over frame-max", frameBytes(3, 1, make([]byte, 4089), FrameEnd), 4096, "exceeds frame-max 4096"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadFrame(reader(c.in, 4096), c.frameMax)
			frameErr(t, err, c.contains)
			_, err = NewFrameReader(reader(c.in, 4096), c.frameMax).ReadFrame()
			frameErr(t, err, c.contains)
			_, err = NewFrameReader(reader(c.in, 16), c.frameMax).ReadFrame() // payload bigger than the buffer
			frameErr(t, err, c.contains)
		})
	}
}

func TestFrameMaxBoundary(t *testing.T) {
	exact := frameBytes(3, 1, make([]byte, 4096-8), FrameEnd)
	if _, err := ReadFrame(reader(exact, 8192), 4096); err != nil {
		t.Fatalf("frame of exactly frame-max: %v", err)
	}
	over := frameBytes(3, 1, make([]byte, 4096-7), FrameEnd)
	_, err := ReadFrame(reader(over, 8192), 4096)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
	frameErr(t, err, "frame-max")
	// The size is checked from the header alone, before the payload is read.
	_, err = ReadFrame(reader(over[:7], 8192), 4096)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("header only: %v", err)
	}
}

func TestTruncatedFrames(t *testing.T) {
	full := frameBytes(3, 1, []byte("hello"), FrameEnd)
	for n := 1; n < len(full); n++ {
		if _, err := ReadFrame(reader(full[:n], 4096), 0); err != io.ErrUnexpectedEOF {
			t.Fatalf("ReadFrame prefix %d: %v", n, err)
		}
		if _, err := NewFrameReader(reader(full[:n], 4096), 0).ReadFrame(); err != io.ErrUnexpectedEOF {
			t.Fatalf("FrameReader prefix %d: %v", n, err)
		}
		if _, err := NewFrameReader(reader(full[:n], 16), 0).ReadFrame(); err != io.ErrUnexpectedEOF {
			t.Fatalf("FrameReader (small buffer) prefix %d: %v", n, err)
		}
	}
}

// A size field claiming a gigabyte, with frame-max 0 and only a few bytes
// behind it, fails on EOF without allocating the gigabyte first.
func TestLyingSizeDoesNotAllocateUpFront(t *testing.T) {
	in := []byte{3, 0, 1, 0x40, 0, 0, 0, 'x'}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := ReadFrame(reader(in, 16), 0); err != io.ErrUnexpectedEOF {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 2<<20 {
		t.Fatalf("allocated %d bytes for a frame that never arrived", n)
	}
}

// FrameReader returns the same frames as ReadFrame, whether they fit its
// buffer (returned in place) or not (read into its own buffer).
func TestFrameReaderMatchesReadFrame(t *testing.T) {
	var stream []byte
	var want []Frame
	for i, size := range []int{0, 1, 5, 100, 3000, 70000, 2, 0} {
		p := bytes.Repeat([]byte{byte(i + 1)}, size)
		if size == 0 {
			p = nil
		}
		want = append(want, Frame{FrameBody, uint16(i), p})
		stream = append(stream, frameBytes(3, uint16(i), p, FrameEnd)...)
	}
	stream = append(stream, frameBytes(8, 0, nil, FrameEnd)...)
	want = append(want, Frame{FrameHeartbeat, 0, nil})

	for _, bufSize := range []int{16, 4096, 1 << 17} {
		fr := NewFrameReader(reader(stream, bufSize), 0)
		plain := reader(stream, bufSize)
		for i, w := range want {
			got, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("buf %d frame %d: %v", bufSize, i, err)
			}
			if got.Type != w.Type || got.Channel != w.Channel || !bytes.Equal(got.Payload, w.Payload) {
				t.Fatalf("buf %d frame %d: got %v/%d/%d bytes", bufSize, i, got.Type, got.Channel, len(got.Payload))
			}
			other, err := ReadFrame(plain, 0)
			if err != nil || !bytes.Equal(other.Payload, w.Payload) {
				t.Fatalf("ReadFrame buf %d frame %d: %v", bufSize, i, err)
			}
		}
		if _, err := fr.ReadFrame(); err != io.EOF {
			t.Fatalf("buf %d: end: %v", bufSize, err)
		}
	}
}

func TestFrameReaderDoesNotAllocate(t *testing.T) {
	one := frameBytes(3, 1, make([]byte, 1000), FrameEnd)
	stream := bytes.Repeat(one, 200)
	br := bufio.NewReaderSize(bytes.NewReader(stream), 64<<10)
	fr := NewFrameReader(br, 0)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := fr.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per frame", allocs)
	}
}

func TestFrameReaderSetFrameMax(t *testing.T) {
	in := frameBytes(3, 1, make([]byte, 5000), FrameEnd)
	fr := NewFrameReader(reader(append(in, in...), 1<<16), FrameMinSize)
	if _, err := fr.ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v", err)
	}
	fr = NewFrameReader(reader(in, 1<<16), FrameMinSize)
	fr.SetFrameMax(131072)
	if _, err := fr.ReadFrame(); err != nil {
		t.Fatal(err)
	}
}

func TestFrameTypeString(t *testing.T) {
	if FrameHeartbeat.String() != "heartbeat" || FrameType(9).String() != "frame type 9" {
		t.Fatal(FrameHeartbeat.String(), FrameType(9).String())
	}
}

// Buffered counts what was read and not yet returned, whether the last
// frame was returned in place or not; after Reset onto another reader the
// frames continue from it, nothing of the old one discarded from the new.
func TestFrameReaderBufferedAndReset(t *testing.T) {
	small := frameBytes(3, 1, []byte("abc"), FrameEnd)
	big := frameBytes(3, 2, make([]byte, 100), FrameEnd)
	for _, bufSize := range []int{16, 4096} {
		stream := append(append(slices.Clone(small), big...), small...)
		fr := NewFrameReader(reader(stream, bufSize), 0)
		if n := fr.Buffered(); n != 0 {
			t.Fatalf("buf %d: %d buffered before reading", bufSize, n)
		}
		// A 16-byte buffer holds only part of what is left.
		for i, left := range []int{len(big) + len(small), len(small), 0} {
			if _, err := fr.ReadFrame(); err != nil {
				t.Fatal(err)
			}
			if n := fr.Buffered(); n > left || (bufSize == 4096 && n != left) {
				t.Fatalf("buf %d after frame %d: %d buffered, want %d", bufSize, i, n, left)
			}
		}
		fr.Reset(reader(small, bufSize))
		f, err := fr.ReadFrame()
		if err != nil || f.Channel != 1 || string(f.Payload) != "abc" {
			t.Fatalf("buf %d after Reset: %v %v", bufSize, f, err)
		}
	}
}

// HasFrame is true exactly when the next frame is wholly buffered, never
// reading from the connection to find out.
func TestFrameReaderHasFrame(t *testing.T) {
	small := frameBytes(3, 1, []byte("abc"), FrameEnd)
	big := frameBytes(3, 2, make([]byte, 100), FrameEnd)
	stream := append(append(slices.Clone(small), big...), small[:5]...)
	fr := NewFrameReader(reader(stream, 4096), 0)
	if fr.HasFrame() {
		t.Fatal("HasFrame before anything was read")
	}
	if _, err := fr.ReadFrame(); err != nil { // fills the buffer
		t.Fatal(err)
	}
	if !fr.HasFrame() {
		t.Fatal("the big frame is buffered, HasFrame says no")
	}
	if _, err := fr.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if fr.HasFrame() {
		t.Fatal("5 bytes of a frame are buffered, HasFrame says yes")
	}
	// A frame cut right after its header.
	fr = NewFrameReader(reader(append(slices.Clone(small), big[:7]...), 4096), 0)
	if _, err := fr.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if fr.HasFrame() {
		t.Fatal("a bare header is buffered, HasFrame says yes")
	}
}
