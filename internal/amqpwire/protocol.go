package amqpwire

import (
	"fmt"
	"io"
)

// ProtocolHeader opens every AMQP 0-9-1 connection: "AMQP", 0, then the
// version 0-9-1. A server that receives any other header writes this one back
// and closes the socket (spec section 4.2.2).
const ProtocolHeader = "AMQP\x00\x00\x09\x01"

// protocolHeader09 is the header of AMQP 0-9, which RabbitMQ accepts and
// serves as 0-9-1; the two are wire compatible.
const protocolHeader09 = "AMQP\x01\x01\x00\x09"

// ProtocolHeaderError reports a protocol header this package does not speak.
// The server should answer by writing ProtocolHeader and closing.
type ProtocolHeaderError struct {
	Header [8]byte // what the client sent
}

func (e *ProtocolHeaderError) Error() string {
	if string(e.Header[:4]) == "AMQP" {
		return fmt.Sprintf("unsupported AMQP protocol version %d-%d-%d-%d", e.Header[4], e.Header[5], e.Header[6], e.Header[7])
	}
	return fmt.Sprintf("not an AMQP protocol header: %q", e.Header[:])
}

// CheckProtocolHeader accepts the 0-9-1 header (and 0-9's, which is
// compatible); anything else is a *ProtocolHeaderError.
func CheckProtocolHeader(h [8]byte) error {
	switch string(h[:]) {
	case ProtocolHeader, protocolHeader09:
		return nil
	}
	return &ProtocolHeaderError{Header: h}
}

// ReadProtocolHeader reads the 8-byte protocol header and checks it. A
// connection closed before 8 bytes gives io.EOF or io.ErrUnexpectedEOF.
func ReadProtocolHeader(r io.Reader) error {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return err
	}
	return CheckProtocolHeader(h)
}
