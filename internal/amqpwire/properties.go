package amqpwire

import (
	"fmt"
	"time"
)

// Properties are the basic class's 14 content properties, carried in the
// content header after the property flags.
type Properties struct {
	ContentType     string    // MIME type
	ContentEncoding string    // MIME encoding
	Headers         Table     // application headers; read by headers exchanges
	DeliveryMode    uint8     // 1 transient, 2 persistent
	Priority        uint8     // 0 to 9
	CorrelationID   string    // application correlation identifier
	ReplyTo         string    // address to reply to
	Expiration      string    // per-message TTL in milliseconds, as a decimal string
	MessageID       string    // application message identifier
	Timestamp       time.Time // whole seconds; decoded as UTC
	Type            string    // message type name
	UserID          string    // creating user; RabbitMQ checks it against the connection's user
	AppID           string    // creating application
	ClusterID       string    // "reserved" in 0-9-1; kept for round trips

	// Present records which properties the header carried (set by Decode).
	// Encode sends a property when it is non-zero or its flag is set here, so
	// decoded properties re-encode exactly, including present-but-zero ones
	// such as priority 0.
	Present PropertyFlags
}

// PropertyFlags is the property-flags word: one bit per property, the first
// property in the highest bit. Bit 0 is the continuation bit, announcing
// another flags word; 0-9-1 needs only one word for its 14 properties.
type PropertyFlags uint16

// The flag of each property.
const (
	FlagContentType PropertyFlags = 1 << (15 - iota)
	FlagContentEncoding
	FlagHeaders
	FlagDeliveryMode
	FlagPriority
	FlagCorrelationID
	FlagReplyTo
	FlagExpiration
	FlagMessageID
	FlagTimestamp
	FlagType
	FlagUserID
	FlagAppID
	FlagClusterID
)

// flagContinuation announces another flags word.
const flagContinuation PropertyFlags = 1

// allPropertyFlags are the flags of properties 0-9-1 defines.
const allPropertyFlags = FlagContentType | FlagContentEncoding | FlagHeaders | FlagDeliveryMode |
	FlagPriority | FlagCorrelationID | FlagReplyTo | FlagExpiration | FlagMessageID |
	FlagTimestamp | FlagType | FlagUserID | FlagAppID | FlagClusterID

// Flags returns the flags Encode will send: Present plus every non-zero
// property.
func (p *Properties) Flags() PropertyFlags {
	f := p.Present & allPropertyFlags
	set := func(flag PropertyFlags, nonZero bool) {
		if nonZero {
			f |= flag
		}
	}
	set(FlagContentType, p.ContentType != "")
	set(FlagContentEncoding, p.ContentEncoding != "")
	set(FlagHeaders, p.Headers != nil)
	set(FlagDeliveryMode, p.DeliveryMode != 0)
	set(FlagPriority, p.Priority != 0)
	set(FlagCorrelationID, p.CorrelationID != "")
	set(FlagReplyTo, p.ReplyTo != "")
	set(FlagExpiration, p.Expiration != "")
	set(FlagMessageID, p.MessageID != "")
	set(FlagTimestamp, !p.Timestamp.IsZero())
	set(FlagType, p.Type != "")
	set(FlagUserID, p.UserID != "")
	set(FlagAppID, p.AppID != "")
	set(FlagClusterID, p.ClusterID != "")
	return f
}

// Encode appends the property flags and property list, the part of a content
// header after the body size.
func (p *Properties) Encode(dst []byte) ([]byte, error) {
	f := p.Flags()
	dst = appendUint16(dst, uint16(f))
	var err error
	str := func(flag PropertyFlags, name, s string) {
		if err == nil && f&flag != 0 {
			if dst, err = appendShortstr(dst, s); err != nil {
				err = fmt.Errorf("wire: encode property %s: %w", name, err)
			}
		}
	}
	str(FlagContentType, "content-type", p.ContentType)
	str(FlagContentEncoding, "content-encoding", p.ContentEncoding)
	if err == nil && f&FlagHeaders != 0 {
		if dst, err = appendTable(dst, p.Headers); err != nil {
			err = fmt.Errorf("wire: encode property headers: %w", err)
		}
	}
	if f&FlagDeliveryMode != 0 {
		dst = append(dst, p.DeliveryMode)
	}
	if f&FlagPriority != 0 {
		dst = append(dst, p.Priority)
	}
	str(FlagCorrelationID, "correlation-id", p.CorrelationID)
	str(FlagReplyTo, "reply-to", p.ReplyTo)
	str(FlagExpiration, "expiration", p.Expiration)
	str(FlagMessageID, "message-id", p.MessageID)
	if f&FlagTimestamp != 0 {
		dst = appendTimestamp(dst, p.Timestamp)
	}
	str(FlagType, "type", p.Type)
	str(FlagUserID, "user-id", p.UserID)
	str(FlagAppID, "app-id", p.AppID)
	str(FlagClusterID, "cluster-id", p.ClusterID)
	return dst, err
}

// Decode reads property flags and the property list, replacing all of p.
// Errors are *Error with CodeFrameError.
func (p *Properties) Decode(b []byte) error {
	d := decoder{buf: b, what: "content header"}
	p.decode(&d)
	return d.finish()
}

func (p *Properties) decode(d *decoder) {
	f := PropertyFlags(d.uint16("property-flags"))
	if d.failed() {
		return
	}
	if f&^(allPropertyFlags|flagContinuation) != 0 {
		d.fail("property-flags", "flags %#04x set a property 0-9-1 does not define", uint16(f))
		return
	}
	// Further flag words may follow; 0-9-1 defines nothing in them.
	for more := f&flagContinuation != 0; more; {
		next := PropertyFlags(d.uint16("property-flags"))
		if d.failed() {
			return
		}
		if next&^flagContinuation != 0 {
			d.fail("property-flags", "continuation flags %#04x set a property 0-9-1 does not define", uint16(next))
			return
		}
		more = next&flagContinuation != 0
	}
	f &= allPropertyFlags

	str := func(flag PropertyFlags, old *string, name string) {
		if f&flag != 0 {
			*old = d.shortstr(*old, name)
		} else {
			*old = ""
		}
	}
	str(FlagContentType, &p.ContentType, "content-type")
	str(FlagContentEncoding, &p.ContentEncoding, "content-encoding")
	p.Headers = nil
	if f&FlagHeaders != 0 {
		p.Headers = d.table("headers")
	}
	p.DeliveryMode, p.Priority = 0, 0
	if f&FlagDeliveryMode != 0 {
		p.DeliveryMode = d.octet("delivery-mode")
	}
	if f&FlagPriority != 0 {
		p.Priority = d.octet("priority")
	}
	str(FlagCorrelationID, &p.CorrelationID, "correlation-id")
	str(FlagReplyTo, &p.ReplyTo, "reply-to")
	str(FlagExpiration, &p.Expiration, "expiration")
	str(FlagMessageID, &p.MessageID, "message-id")
	p.Timestamp = time.Time{}
	if f&FlagTimestamp != 0 {
		p.Timestamp = d.timestamp("timestamp")
	}
	str(FlagType, &p.Type, "type")
	str(FlagUserID, &p.UserID, "user-id")
	str(FlagAppID, &p.AppID, "app-id")
	str(FlagClusterID, &p.ClusterID, "cluster-id")
	p.Present = f
}
