package amqpwire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// FrameType is the first octet of a frame. The four 0-9-1 types are generated
// from the spec: FrameMethod, FrameHeader, FrameBody, FrameHeartbeat.
type FrameType uint8

func (t FrameType) String() string {
	switch t {
	case FrameMethod:
		return "method"
	case FrameHeader:
		return "header"
	case FrameBody:
		return "body"
	case FrameHeartbeat:
		return "heartbeat"
	}
	return fmt.Sprintf("frame type %d", uint8(t))
}

// Frame is one frame: type, channel and payload. The payload of a method
// frame is decoded with DecodeMethod, of a header frame with
// ContentHeader.Decode; a body frame's payload is message bytes; a heartbeat
// has none.
type Frame struct {
	Type    FrameType
	Channel uint16
	Payload []byte
}

// FrameOverhead is what a frame adds to its payload: a 7-byte header (type,
// channel, payload size) and the frame-end octet. frame-max counts it.
const FrameOverhead = 8

const frameHeaderSize = 7

// payloadChunk caps how much a payload read allocates ahead of the bytes that
// have actually arrived, so a lying size field cannot make us allocate
// gigabytes up front.
const payloadChunk = 1 << 20

// ReadFrame reads one frame into a newly allocated payload, which the caller
// owns. frameMax is the negotiated frame-max, frame header and end octet
// included; 0 means no limit.
//
// A malformed frame (unknown type, size over frameMax, wrong frame-end octet,
// heartbeat on a channel other than 0 or with a payload) is an *Error with
// CodeFrameError, which closes the connection; the too-large case also
// matches errors.Is(err, ErrFrameTooLarge). io.EOF means the peer closed
// between frames, io.ErrUnexpectedEOF inside one.
func ReadFrame(r *bufio.Reader, frameMax uint32) (Frame, error) {
	h, err := peekFrameHeader(r)
	if err != nil {
		return Frame{}, err
	}
	f, size, err := parseFrameHeader(h, frameMax)
	if err != nil {
		return Frame{}, err
	}
	if _, err := r.Discard(frameHeaderSize); err != nil {
		return Frame{}, err
	}
	if size > 0 {
		if f.Payload, err = readPayload(r, nil, size); err != nil {
			return Frame{}, err
		}
	}
	if err := readFrameEnd(r); err != nil {
		return Frame{}, err
	}
	return f, nil
}

// FrameReader reads frames without allocating per frame: a payload is only
// valid until the next ReadFrame. Frames that fit r's buffer are returned in
// place; larger ones are read into a buffer the FrameReader reuses.
type FrameReader struct {
	r        *bufio.Reader
	frameMax uint32
	buf      []byte
	pending  int // bytes of the previous frame still buffered in r
}

// NewFrameReader reads frames from r, which should already have yielded the
// protocol header. Before connection.tune-ok a server passes FrameMinSize or
// a larger limit of its own; see SetFrameMax.
func NewFrameReader(r *bufio.Reader, frameMax uint32) *FrameReader {
	return &FrameReader{r: r, frameMax: frameMax}
}

// SetFrameMax changes the limit, e.g. to the value agreed in connection.tune-ok.
// 0 means no limit.
func (fr *FrameReader) SetFrameMax(frameMax uint32) { fr.frameMax = frameMax }

// Buffered returns how many bytes were read from the connection and not
// yet returned in a frame: at 0 the next ReadFrame reads from it.
func (fr *FrameReader) Buffered() int { return fr.r.Buffered() - fr.pending }

// HasFrame reports whether a whole frame is buffered: the next ReadFrame
// returns it without reading from the connection. A front end that holds
// work back until its input runs dry asks this before each frame.
func (fr *FrameReader) HasFrame() bool {
	n := fr.Buffered()
	if n < frameHeaderSize {
		return false
	}
	b, err := fr.r.Peek(fr.pending + frameHeaderSize)
	if err != nil {
		return false
	}
	size := binary.BigEndian.Uint32(b[fr.pending+3:])
	return uint64(n) >= uint64(size)+FrameOverhead
}

// Reset makes fr read from r from now on; whatever the old reader held is
// dropped, so call it when Buffered is 0 (the last payload is then no
// longer valid). The frame-max is kept. A connection uses it to hold a
// read buffer only while the peer is sending.
func (fr *FrameReader) Reset(r *bufio.Reader) {
	fr.r = r
	fr.pending = 0
}

// ReadFrame reads the next frame; errors are as for the ReadFrame function.
// The payload aliases internal buffers and is valid until the next call.
func (fr *FrameReader) ReadFrame() (Frame, error) {
	if fr.pending > 0 {
		if _, err := fr.r.Discard(fr.pending); err != nil {
			return Frame{}, err
		}
		fr.pending = 0
	}
	h, err := peekFrameHeader(fr.r)
	if err != nil {
		return Frame{}, err
	}
	f, size, err := parseFrameHeader(h, fr.frameMax)
	if err != nil {
		return Frame{}, err
	}

	if total := uint64(size) + FrameOverhead; total <= uint64(fr.r.Size()) {
		b, err := fr.r.Peek(int(total))
		if err != nil {
			return Frame{}, unexpectedEOF(err)
		}
		if end := b[total-1]; end != FrameEnd {
			return Frame{}, frameEndError(end)
		}
		fr.pending = int(total)
		f.Payload = b[frameHeaderSize : total-1 : total-1]
		return f, nil
	}

	if _, err := fr.r.Discard(frameHeaderSize); err != nil {
		return Frame{}, err
	}
	if fr.buf, err = readPayload(fr.r, fr.buf, size); err != nil {
		return Frame{}, err
	}
	if err := readFrameEnd(fr.r); err != nil {
		return Frame{}, err
	}
	f.Payload = fr.buf
	return f, nil
}

// peekFrameHeader returns the next 7 bytes without consuming them.
func peekFrameHeader(r *bufio.Reader) ([]byte, error) {
	h, err := r.Peek(frameHeaderSize)
	if err != nil {
		if len(h) == 0 && errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, unexpectedEOF(err)
	}
	return h, nil
}

// parseFrameHeader checks a frame header and returns the frame (without its
// payload) and the payload size.
func parseFrameHeader(h []byte, frameMax uint32) (Frame, uint32, error) {
	f := Frame{Type: FrameType(h[0]), Channel: binary.BigEndian.Uint16(h[1:3])}
	size := binary.BigEndian.Uint32(h[3:7])
	switch f.Type {
	case FrameMethod, FrameHeader, FrameBody:
	case FrameHeartbeat:
		if f.Channel != 0 {
			return f, 0, newFrameError(fmt.Sprintf("heartbeat frame on channel %d, must be 0", f.Channel))
		}
		if size != 0 {
			return f, 0, newFrameError(fmt.Sprintf("heartbeat frame with a %d-byte payload, must be empty", size))
		}
	default:
		return f, 0, newFrameError(fmt.Sprintf("unknown frame type %d", h[0]))
	}
	if frameMax != 0 && uint64(size)+FrameOverhead > uint64(frameMax) {
		e := newFrameError(fmt.Sprintf("%s frame of %d bytes on channel %d exceeds frame-max %d",
			f.Type, uint64(size)+FrameOverhead, f.Channel, frameMax))
		e.cause = ErrFrameTooLarge
		return f, 0, e
	}
	return f, size, nil
}

// readPayload reads size bytes into buf (reused if large enough), growing it
// no faster than the bytes arrive.
func readPayload(r io.Reader, buf []byte, size uint32) ([]byte, error) {
	buf = buf[:0]
	for uint32(len(buf)) < size {
		step := min(int(size-uint32(len(buf))), payloadChunk)
		n := len(buf)
		if cap(buf)-n < step {
			grown := make([]byte, n, n+max(step, n)) // at least double, like append
			copy(grown, buf)
			buf = grown
		}
		buf = buf[:n+step]
		if _, err := io.ReadFull(r, buf[n:]); err != nil {
			return nil, unexpectedEOF(err)
		}
	}
	return buf, nil
}

func readFrameEnd(r *bufio.Reader) error {
	end, err := r.ReadByte()
	if err != nil {
		return unexpectedEOF(err)
	}
	if end != FrameEnd {
		return frameEndError(end)
	}
	return nil
}

func frameEndError(got byte) *Error {
	return newFrameError(fmt.Sprintf("frame-end octet is %#02x, want %#02x", got, FrameEnd))
}

// unexpectedEOF turns io.EOF inside a frame into io.ErrUnexpectedEOF.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// WriteFrame writes one frame to w. With a *bufio.Writer it copies into the
// buffer; with anything else it makes a single Write call. Writer is the
// cheaper way to send many frames.
func WriteFrame(w io.Writer, f Frame) error {
	if uint64(len(f.Payload)) > math.MaxUint32 {
		return fmt.Errorf("wire: frame payload of %d bytes does not fit a 32-bit size", len(f.Payload))
	}
	if bw, ok := w.(*bufio.Writer); ok {
		if _, err := bw.Write(appendFrameHeader(bw.AvailableBuffer(), f.Type, f.Channel, uint32(len(f.Payload)))); err != nil {
			return err
		}
		if _, err := bw.Write(f.Payload); err != nil {
			return err
		}
		return bw.WriteByte(FrameEnd)
	}
	buf := make([]byte, 0, len(f.Payload)+FrameOverhead)
	buf = appendFrameHeader(buf, f.Type, f.Channel, uint32(len(f.Payload)))
	buf = append(buf, f.Payload...)
	buf = append(buf, FrameEnd)
	_, err := w.Write(buf)
	return err
}

func appendFrameHeader(dst []byte, t FrameType, channel uint16, size uint32) []byte {
	dst = append(dst, byte(t))
	dst = appendUint16(dst, channel)
	return appendUint32(dst, size)
}
