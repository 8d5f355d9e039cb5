package amqpwire

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Error is an AMQP exception: the reply code and text a peer sends in
// connection.close (Hard) or channel.close (soft), plus the class and method
// that caused it, if any.
//
// Decoding in this package reports protocol violations as *Error, so a server
// can send them back unchanged; the server raises its own with Errorf.
type Error struct {
	Code     uint16 // reply code, e.g. CodeNotFound
	Text     string // reply text, by RabbitMQ convention "NOT_FOUND - detail"
	ClassID  uint16 // class of the failing method, 0 if none
	MethodID uint16 // method of the failing method, 0 if none
	Hard     bool   // close the connection (true) or only the channel

	cause error // a sentinel such as ErrFrameTooLarge, for errors.Is
}

// Errorf returns an *Error for code whose text is the code's name, " - ",
// and the formatted detail, as RabbitMQ writes them. Hard follows the spec's
// classification of the code (see IsHardError); set it explicitly where a
// server deviates, e.g. 403 ACCESS_REFUSED on connection.open is hard.
func Errorf(code uint16, format string, args ...any) *Error {
	detail := fmt.Sprintf(format, args...)
	text := detail
	if name := ReplyCodeName(code); name != "" {
		text = name + " - " + detail
	}
	return &Error{Code: code, Text: text, Hard: IsHardError(code)}
}

// In records the method that caused the error and returns e.
func (e *Error) In(id MethodID) *Error {
	e.ClassID, e.MethodID = id.Class(), id.Method()
	return e
}

func (e *Error) Error() string {
	kind := "channel"
	if e.Hard {
		kind = "connection"
	}
	s := fmt.Sprintf("amqp %s error %d: %s", kind, e.Code, e.Text)
	if e.ClassID != 0 || e.MethodID != 0 {
		s += " (in " + NewMethodID(e.ClassID, e.MethodID).String() + ")"
	}
	return s
}

// Unwrap returns the sentinel behind the error, if any.
func (e *Error) Unwrap() error { return e.cause }

// CloseMethod returns the method that reports e to the peer: *ConnectionClose
// for a hard error, *ChannelClose otherwise. The text is cut to the 255 bytes
// a short string can hold, on a UTF-8 boundary.
func (e *Error) CloseMethod() Method {
	text := truncateShortstr(e.Text)
	if e.Hard {
		return &ConnectionClose{ReplyCode: e.Code, ReplyText: text, ClassID: e.ClassID, MethodID: e.MethodID}
	}
	return &ChannelClose{ReplyCode: e.Code, ReplyText: text, ClassID: e.ClassID, MethodID: e.MethodID}
}

func truncateShortstr(s string) string {
	if len(s) <= maxShortstr {
		return s
	}
	cut := maxShortstr
	for cut > 0 && !utf8.RuneStart(s[cut]) { // s[cut] is the first byte dropped
		cut--
	}
	return s[:cut]
}

// Sentinels reachable with errors.Is.
var (
	// ErrFrameTooLarge: a frame exceeded the negotiated frame-max. Reading
	// reports it inside an *Error with CodeFrameError; writing returns it
	// wrapped.
	ErrFrameTooLarge = errors.New("frame larger than frame-max")
	// ErrShortstrTooLong: a short string over 255 bytes was given to an encoder.
	ErrShortstrTooLong = errors.New("short string longer than 255 bytes")
	// ErrUnsupportedValue: a table held a Go value with no AMQP field type.
	ErrUnsupportedValue = errors.New("unsupported field table value")
	// ErrNestingTooDeep: tables and arrays nested deeper than 32 levels.
	ErrNestingTooDeep = errors.New("field tables nested too deeply")
)

// newFrameError reports a malformed frame or undecodable payload: 501
// FRAME_ERROR, which closes the connection.
func newFrameError(detail string) *Error {
	return Errorf(CodeFrameError, "%s", detail)
}

// unknownMethodError reports a method id the spec does not define.
func unknownMethodError(id MethodID) *Error {
	return Errorf(CodeNotImplemented, "unknown method: class %d, method %d", id.Class(), id.Method()).In(id)
}

// encodeError wraps a failure to encode one field of a method.
func encodeError(id MethodID, field string, err error) error {
	return fmt.Errorf("wire: encode %s field %s: %w", id, field, err)
}
