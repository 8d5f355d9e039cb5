package amqpwire

// ContentHeader is the payload of a header frame: it follows a method that
// carries content and announces the body size and the message properties.
type ContentHeader struct {
	ClassID    uint16 // class of the method it follows; ClassBasic in practice
	Weight     uint16 // unused, always 0
	BodySize   uint64 // total bytes in the body frames that follow
	Properties Properties
}

// contentHeaderFixed is the size of class id, weight and body size.
const contentHeaderFixed = 12

// Encode appends the header frame payload to dst.
func (h *ContentHeader) Encode(dst []byte) ([]byte, error) {
	dst = appendUint16(dst, h.ClassID)
	dst = appendUint16(dst, h.Weight)
	dst = appendUint64(dst, h.BodySize)
	return h.Properties.Encode(dst)
}

// Decode reads a header frame payload into h. Errors are *Error with
// CodeFrameError.
func (h *ContentHeader) Decode(payload []byte) error {
	d := decoder{buf: payload, what: "content header"}
	h.ClassID = d.uint16("class-id")
	h.Weight = d.uint16("weight")
	h.BodySize = d.uint64("body-size")
	h.Properties.decode(&d)
	return d.finish()
}

// appendContentHeaderRaw appends a header frame payload whose property flags
// and list are already encoded, as kept from a decoded header.
func appendContentHeaderRaw(dst []byte, classID uint16, bodySize uint64, rawProperties []byte) []byte {
	dst = appendUint16(dst, classID)
	dst = appendUint16(dst, 0)
	dst = appendUint64(dst, bodySize)
	if len(rawProperties) == 0 {
		return appendUint16(dst, 0) // no properties: a single zero flags word
	}
	return append(dst, rawProperties...)
}
