package amqpwire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Writer batches outgoing frames in a bufio.Writer. Methods and content
// headers are encoded into a reused scratch buffer, and body bytes are copied
// straight from the caller's slice, so steady-state writes do not allocate.
// Nothing reaches the connection until the buffer fills or Flush is called.
//
// A Writer is not safe for concurrent use; a connection has one writer.
type Writer struct {
	bw       *bufio.Writer
	frameMax uint32
	scratch  []byte
	bodyHdr  [frameHeaderSize]byte
}

// DefaultWriterBuffer is the buffer size NewWriter uses when given 0.
const DefaultWriterBuffer = 64 << 10

// NewWriter returns a Writer buffering size bytes (DefaultWriterBuffer if
// size <= 0) in front of w. If w is already a large enough *bufio.Writer it
// is used as is. The frame-max starts unlimited; see SetFrameMax.
func NewWriter(w io.Writer, size int) *Writer {
	if size <= 0 {
		size = DefaultWriterBuffer
	}
	return &Writer{bw: bufio.NewWriterSize(w, size), scratch: make([]byte, 0, 512)}
}

// SetFrameMax sets the negotiated frame-max: body frames are cut to fit it
// and larger method or header frames are refused. 0 means no limit; values
// below FrameMinSize, which negotiation never yields, are raised to it.
func (w *Writer) SetFrameMax(frameMax uint32) {
	if frameMax != 0 && frameMax < FrameMinSize {
		frameMax = FrameMinSize
	}
	w.frameMax = frameMax
}

// Flush writes buffered frames to the connection.
func (w *Writer) Flush() error { return w.bw.Flush() }

// Buffered returns how many bytes wait for Flush.
func (w *Writer) Buffered() int { return w.bw.Buffered() }

// WriteFrame writes a frame as is, refusing one over frame-max.
func (w *Writer) WriteFrame(f Frame) error {
	if err := w.checkSize(uint64(len(f.Payload)), f.Type); err != nil {
		return err
	}
	return WriteFrame(w.bw, f)
}

// WriteHeartbeat writes a heartbeat frame.
func (w *Writer) WriteHeartbeat() error {
	_, err := w.bw.Write(appendFrameHeader(w.bw.AvailableBuffer(), FrameHeartbeat, 0, 0))
	if err != nil {
		return err
	}
	return w.bw.WriteByte(FrameEnd)
}

// WriteMethod writes a method frame. If m cannot be encoded nothing is
// written.
func (w *Writer) WriteMethod(channel uint16, m Method) error {
	buf, err := w.appendMethodFrame(w.scratch[:0], channel, m)
	w.scratch = buf[:0]
	if err != nil {
		return err
	}
	_, err = w.bw.Write(buf)
	return err
}

// WriteContent writes a method that carries content, its content header with
// props encoded, and the body cut into frames that fit frame-max. If the
// method or properties cannot be encoded nothing is written.
func (w *Writer) WriteContent(channel uint16, m Method, props *Properties, body []byte) error {
	buf, err := w.appendMethodFrame(w.scratch[:0], channel, m)
	if err == nil {
		start := len(buf)
		buf = appendFrameHeader(buf, FrameHeader, channel, 0)
		buf = appendUint16(buf, m.ID().Class())
		buf = appendUint16(buf, 0)
		buf = appendUint64(buf, uint64(len(body)))
		if buf, err = props.Encode(buf); err == nil {
			buf, err = w.endFrame(buf, start)
		}
	}
	w.scratch = buf[:0]
	if err != nil {
		return err
	}
	return w.writeWithBody(buf, channel, body)
}

// WriteContentRaw is WriteContent with the property flags and list already
// encoded, e.g. as kept in Content.RawProperties from the publish, so
// delivering a message does not re-encode its properties. Empty
// rawProperties means no properties.
func (w *Writer) WriteContentRaw(channel uint16, m Method, rawProperties, body []byte) error {
	buf, err := w.appendMethodFrame(w.scratch[:0], channel, m)
	if err == nil {
		start := len(buf)
		buf = appendFrameHeader(buf, FrameHeader, channel, 0)
		buf = appendContentHeaderRaw(buf, m.ID().Class(), uint64(len(body)), rawProperties)
		buf, err = w.endFrame(buf, start)
	}
	w.scratch = buf[:0]
	if err != nil {
		return err
	}
	return w.writeWithBody(buf, channel, body)
}

// writeWithBody writes the encoded method and header frames, then body frames.
func (w *Writer) writeWithBody(frames []byte, channel uint16, body []byte) error {
	if _, err := w.bw.Write(frames); err != nil {
		return err
	}
	chunk := len(body)
	if w.frameMax != 0 {
		chunk = int(w.frameMax - FrameOverhead)
	}
	for len(body) > 0 {
		n := min(chunk, len(body))
		w.bodyHdr[0] = byte(FrameBody)
		binary.BigEndian.PutUint16(w.bodyHdr[1:3], channel)
		binary.BigEndian.PutUint32(w.bodyHdr[3:7], uint32(n))
		if _, err := w.bw.Write(w.bodyHdr[:]); err != nil {
			return err
		}
		if _, err := w.bw.Write(body[:n]); err != nil {
			return err
		}
		if err := w.bw.WriteByte(FrameEnd); err != nil {
			return err
		}
		body = body[n:]
	}
	return nil
}

// appendMethodFrame appends a complete method frame.
func (w *Writer) appendMethodFrame(dst []byte, channel uint16, m Method) ([]byte, error) {
	start := len(dst)
	dst = appendFrameHeader(dst, FrameMethod, channel, 0)
	dst, err := m.Encode(dst)
	if err != nil {
		return dst, err
	}
	return w.endFrame(dst, start)
}

// endFrame patches the size of the frame starting at start and appends the
// frame-end octet.
func (w *Writer) endFrame(dst []byte, start int) ([]byte, error) {
	size := uint64(len(dst) - start - frameHeaderSize)
	if err := w.checkSize(size, FrameType(dst[start])); err != nil {
		return dst, err
	}
	binary.BigEndian.PutUint32(dst[start+3:], uint32(size))
	return append(dst, FrameEnd), nil
}

func (w *Writer) checkSize(payload uint64, t FrameType) error {
	if w.frameMax != 0 && payload+FrameOverhead > uint64(w.frameMax) {
		return fmt.Errorf("wire: %s frame of %d bytes: %w %d", t, payload+FrameOverhead, ErrFrameTooLarge, w.frameMax)
	}
	if payload > 1<<32-1 {
		return fmt.Errorf("wire: %s frame payload of %d bytes does not fit a 32-bit size", t, payload)
	}
	return nil
}
