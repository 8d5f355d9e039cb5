package amqpwire

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// maxShortstr is the longest short string: its length is one octet.
const maxShortstr = 255

// Appenders for the spec's primitive types. All integers are big-endian.

func appendUint16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }
func appendUint32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }
func appendUint64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// appendTimestamp writes seconds since the Unix epoch; sub-second precision
// is lost, as the wire has none.
func appendTimestamp(dst []byte, t time.Time) []byte { return appendUint64(dst, uint64(t.Unix())) }

func appendShortstr(dst []byte, s string) ([]byte, error) {
	if len(s) > maxShortstr {
		return dst, fmt.Errorf("%w (%d bytes)", ErrShortstrTooLong, len(s))
	}
	dst = append(dst, byte(len(s)))
	return append(dst, s...), nil
}

func appendLongstr(dst []byte, s string) ([]byte, error) {
	if uint64(len(s)) > math.MaxUint32 {
		return dst, fmt.Errorf("long string of %d bytes does not fit a 32-bit length", len(s))
	}
	dst = appendUint32(dst, uint32(len(s)))
	return append(dst, s...), nil
}

// decoder reads primitives from a payload with a sticky error: after the
// first failure every read returns a zero value, so generated code can read
// all fields and check once at the end. Failures are *Error with
// CodeFrameError, naming the method (or what) and field.
type decoder struct {
	buf  []byte
	off  int
	id   MethodID // method being decoded; 0 when decoding something else
	what string   // what is decoded when id is 0, e.g. "content header"
	err  *Error
}

// fail records the first failure.
func (d *decoder) fail(field, format string, args ...any) {
	if d.err != nil {
		return
	}
	subject := d.what
	if d.id != 0 {
		subject = d.id.String()
	}
	if field != "" {
		subject += " field " + field
	}
	d.err = newFrameError(fmt.Sprintf("cannot decode %s: %s", subject, fmt.Sprintf(format, args...)))
	if d.id != 0 {
		d.err.In(d.id)
	}
}

func (d *decoder) failed() bool { return d.err != nil }

// take returns the next n bytes, aliasing buf.
func (d *decoder) take(n uint64, field string) []byte {
	if d.err != nil {
		return nil
	}
	if have := uint64(len(d.buf) - d.off); n > have {
		d.fail(field, "truncated: needs %d bytes at offset %d, %d left", n, d.off, have)
		return nil
	}
	b := d.buf[d.off : d.off+int(n)]
	d.off += int(n)
	return b
}

func (d *decoder) octet(field string) uint8 {
	if b := d.take(1, field); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) uint16(field string) uint16 {
	if b := d.take(2, field); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) uint32(field string) uint32 {
	if b := d.take(4, field); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) uint64(field string) uint64 {
	if b := d.take(8, field); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// timestamp reads seconds since the epoch as a UTC time.
func (d *decoder) timestamp(field string) time.Time {
	sec := d.uint64(field)
	if d.err != nil {
		return time.Time{}
	}
	return time.Unix(int64(sec), 0).UTC()
}

// shortstr reads a short string; if it equals old, old is returned and
// nothing is allocated.
func (d *decoder) shortstr(old, field string) string {
	n := d.octet(field)
	return d.str(uint64(n), old, field)
}

// longstr reads a long string; if it equals old, old is returned.
func (d *decoder) longstr(old, field string) string {
	n := d.uint32(field)
	return d.str(uint64(n), old, field)
}

func (d *decoder) str(n uint64, old, field string) string {
	b := d.take(n, field)
	if d.err != nil {
		return ""
	}
	if string(b) == old { // compiles to a comparison, no allocation
		return old
	}
	return string(b)
}

// bytes reads a 32-bit length and that many bytes, copied.
func (d *decoder) bytes(field string) []byte {
	n := d.uint32(field)
	b := d.take(uint64(n), field)
	if d.err != nil {
		return nil
	}
	out := make([]byte, len(b))
	copy(out, b)
	return out
}

// methodHeader checks that the payload starts with d.id.
func (d *decoder) methodHeader() bool {
	got := MethodID(d.uint32("class-id and method-id"))
	if d.err != nil {
		return false
	}
	if got != d.id {
		d.fail("", "payload is for %s", got)
		return false
	}
	return true
}

// finish returns the sticky error, or an error if bytes are left over: like
// RabbitMQ, trailing garbage makes a payload undecodable.
func (d *decoder) finish() error {
	if d.err == nil && d.off != len(d.buf) {
		d.fail("", "%d unexpected trailing bytes", len(d.buf)-d.off)
	}
	if d.err != nil {
		return d.err
	}
	return nil
}
