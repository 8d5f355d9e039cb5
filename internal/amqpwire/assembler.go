package amqpwire

import "fmt"

// Command is a complete method as a channel handles it: the method and, for
// the methods that carry content, the message.
type Command struct {
	Method  Method
	Content *Content // nil unless Method.HasContent()
}

// Content is a message as it travels after basic.publish, basic.deliver,
// basic.get-ok and basic.return.
type Content struct {
	Properties Properties
	// RawProperties are the property flags and list exactly as received, so
	// a server can forward them with Writer.WriteContentRaw instead of
	// re-encoding Properties.
	RawProperties []byte
	Body          []byte
}

// Assembler builds Commands from the frames of one channel: a method frame,
// then for content-carrying methods a header frame and body frames until the
// announced size has arrived. Frame payloads are copied or decoded, so it
// works with FrameReader's reused buffers.
//
// Errors are *Error values: the method decoding errors of DecodeMethod, 505
// UNEXPECTED_FRAME for frames out of order or a content header for another
// class, and 406 PRECONDITION_FAILED (soft) for a body over MaxBodySize.
// After an error the partial command is dropped; a server closing the channel
// or connection must discard further frames on the channel itself, as the
// spec requires, rather than feed them here.
type Assembler struct {
	// MaxBodySize, if non-zero, is the largest body accepted; RabbitMQ's
	// max_message_size.
	MaxBodySize uint64

	method    Method   // method waiting for its content, nil if none
	content   *Content // content being assembled
	bodySize  uint64   // announced by the header
	gotHeader bool
}

// bodyPrealloc caps how much body buffer a header's announced size makes us
// allocate before body bytes arrive.
const bodyPrealloc = 256 << 10

// Add takes the next frame of the channel. complete is true when cmd is a
// finished command. Heartbeat frames are ignored.
func (a *Assembler) Add(f Frame) (cmd Command, complete bool, err error) {
	switch f.Type {
	case FrameMethod:
		if a.method != nil {
			return a.fail(a.unexpected("method frame"))
		}
		m, err := DecodeMethod(f.Payload)
		if err != nil {
			return Command{}, false, err
		}
		if !m.HasContent() {
			return Command{Method: m}, true, nil
		}
		a.method, a.content, a.gotHeader = m, &Content{}, false
		return Command{}, false, nil

	case FrameHeader:
		if a.method == nil || a.gotHeader {
			return a.fail(a.unexpected("content header frame"))
		}
		return a.addHeader(f.Payload)

	case FrameBody:
		if a.method == nil || !a.gotHeader {
			return a.fail(a.unexpected("content body frame"))
		}
		return a.addBody(f.Payload)

	case FrameHeartbeat:
		return Command{}, false, nil
	}
	return a.fail(newFrameError(fmt.Sprintf("unknown frame type %d", uint8(f.Type))))
}

// Reset drops a partially assembled command.
func (a *Assembler) Reset() {
	a.method, a.content, a.bodySize, a.gotHeader = nil, nil, 0, false
}

func (a *Assembler) addHeader(payload []byte) (Command, bool, error) {
	var h ContentHeader
	if err := h.Decode(payload); err != nil {
		if e, ok := err.(*Error); ok {
			e.In(a.method.ID()) // the header belongs to this method
		}
		return a.fail(err)
	}
	if class := a.method.ID().Class(); h.ClassID != class {
		return a.fail(Errorf(CodeUnexpectedFrame, "expected content header for class %d, got one for class %d instead",
			class, h.ClassID).In(a.method.ID()))
	}
	if a.MaxBodySize != 0 && h.BodySize > a.MaxBodySize {
		return a.fail(Errorf(CodePreconditionFailed, "message size %d is larger than configured max size %d",
			h.BodySize, a.MaxBodySize).In(a.method.ID()))
	}
	a.content.Properties = h.Properties
	a.content.RawProperties = append([]byte(nil), payload[contentHeaderFixed:]...)
	a.bodySize, a.gotHeader = h.BodySize, true
	if h.BodySize == 0 {
		return a.finish()
	}
	return Command{}, false, nil
}

func (a *Assembler) addBody(payload []byte) (Command, bool, error) {
	c := a.content
	if remaining := a.bodySize - uint64(len(c.Body)); uint64(len(payload)) > remaining {
		return a.fail(Errorf(CodeUnexpectedFrame, "content body frame of %d bytes exceeds the %d bytes left of the announced body size %d",
			len(payload), remaining, a.bodySize).In(a.method.ID()))
	}
	if c.Body == nil {
		c.Body = make([]byte, 0, min(a.bodySize, max(bodyPrealloc, uint64(len(payload)))))
	}
	c.Body = append(c.Body, payload...)
	if uint64(len(c.Body)) == a.bodySize {
		return a.finish()
	}
	return Command{}, false, nil
}

func (a *Assembler) finish() (Command, bool, error) {
	cmd := Command{Method: a.method, Content: a.content}
	a.Reset()
	return cmd, true, nil
}

func (a *Assembler) fail(err error) (Command, bool, error) {
	a.Reset()
	return Command{}, false, err
}

// unexpected reports a frame that does not fit the assembly state, in
// RabbitMQ's words.
func (a *Assembler) unexpected(got string) *Error {
	switch {
	case a.method == nil:
		return Errorf(CodeUnexpectedFrame, "expected method frame, got %s instead", got)
	case !a.gotHeader:
		return Errorf(CodeUnexpectedFrame, "expected content header for class %d, got %s instead",
			a.method.ID().Class(), got).In(a.method.ID())
	default:
		return Errorf(CodeUnexpectedFrame, "expected content body, got %s instead", got).In(a.method.ID())
	}
}
