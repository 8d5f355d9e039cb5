package amqpwire

import (
	"encoding/binary"
	"fmt"
)

// MethodID identifies a method: class id in the high 16 bits, method id in the
// low 16 bits, which is also how the pair appears at the start of a method
// frame payload. The generated constants (QueueDeclareID, ...) have this type.
type MethodID uint32

// NewMethodID combines a class id and a method id.
func NewMethodID(classID, methodID uint16) MethodID {
	return MethodID(classID)<<16 | MethodID(methodID)
}

// Class returns the class id.
func (id MethodID) Class() uint16 { return uint16(id >> 16) }

// Method returns the method id within the class.
func (id MethodID) Method() uint16 { return uint16(id) }

// String returns the spec name ("queue.declare"), or the numbers for an
// unknown id.
func (id MethodID) String() string {
	if name := MethodName(id); name != "" {
		return name
	}
	return fmt.Sprintf("method %d.%d", id.Class(), id.Method())
}

// Method is one AMQP method. The implementations are the generated structs
// (*QueueDeclare, *BasicPublish, ...); a server switches on the concrete type.
type Method interface {
	// ID returns the class and method id.
	ID() MethodID
	// Name returns the spec name, "class.method".
	Name() string
	// HasContent reports whether a content header and body follow the method
	// (basic.publish, basic.return, basic.deliver, basic.get-ok).
	HasContent() bool
	// Synchronous reports whether the spec marks the method synchronous.
	Synchronous() bool
	// Encode appends the method frame payload (class id, method id,
	// arguments) to dst. It fails only on values the wire cannot carry: a
	// short string over 255 bytes or a table value of an unsupported type.
	Encode(dst []byte) ([]byte, error)
	// Decode reads a whole method frame payload, checking that its ids are
	// the receiver's. Strings equal to the receiver's current values are kept
	// rather than reallocated, so decoding repeatedly into one struct is cheap.
	Decode(payload []byte) error

	decodeArgs(d *decoder)
}

// PeekMethodID returns the method id at the start of a method frame payload
// without decoding the arguments, e.g. to decode basic.publish into a reused
// struct on the hot path.
func PeekMethodID(payload []byte) (MethodID, error) {
	if len(payload) < 4 {
		return 0, newFrameError(fmt.Sprintf("method frame payload is %d bytes, shorter than its class and method ids", len(payload)))
	}
	return MethodID(binary.BigEndian.Uint32(payload)), nil
}

func appendMethodID(dst []byte, id MethodID) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(id))
}
