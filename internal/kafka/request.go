package kafka

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestHeader is the Kafka request header (v1, or v2 with tagged fields
// for flexible versions).
type requestHeader struct {
	key           int16
	version       int16
	correlationID int32
	clientID      string // a null client ID reads as "", as in Kafka
}

var (
	// errUnsupportedApiVersions is an ApiVersions request at a version
	// above ours: it is answered (v0, UNSUPPORTED_VERSION), not refused.
	errUnsupportedApiVersions = errors.New("unsupported ApiVersions version")
	errShortHeader            = errors.New("request header truncated")
)

// decodeRequest parses one request frame (after the size prefix) into its
// header and kmsg request. It fails for a truncated header, an API key or
// version Wharf does not serve, and a body that does not decode; the header
// is returned as far as it was read, for logging and for the ApiVersions
// fallback.
func decodeRequest(frame []byte) (requestHeader, kmsg.Request, error) {
	rd := kbin.Reader{Src: frame}
	hdr, ok := readRequestHeader(&rd)
	if !ok {
		return hdr, nil, errShortHeader
	}

	vr, known := supportedVersions(hdr.key)
	if !known {
		return hdr, nil, fmt.Errorf("unsupported api key %d", hdr.key)
	}
	if hdr.version < vr.min || hdr.version > vr.max {
		if hdr.key == int16(kmsg.ApiVersions) && hdr.version > vr.max {
			return hdr, nil, errUnsupportedApiVersions
		}
		return hdr, nil, fmt.Errorf("unsupported version %d of api key %d (%s); supported %d-%d",
			hdr.version, hdr.key, kmsg.NameForKey(hdr.key), vr.min, vr.max)
	}

	msg := kmsg.RequestForKey(hdr.key)
	msg.SetVersion(hdr.version)
	if msg.IsFlexible() {
		kmsg.SkipTags(&rd) // request header v2: tagged fields after the client ID
		if !rd.Ok() {
			return hdr, nil, errShortHeader
		}
	}
	if err := msg.ReadFrom(rd.Src); err != nil {
		return hdr, nil, fmt.Errorf("decoding %s v%d: %w", kmsg.NameForKey(hdr.key), hdr.version, err)
	}
	return hdr, msg, nil
}

// readRequestHeader reads the request header up to the client ID (the
// tagged fields of header v2 follow for flexible versions). It reports
// whether the header was complete; the fields read so far are returned
// either way.
func readRequestHeader(rd *kbin.Reader) (requestHeader, bool) {
	var hdr requestHeader
	hdr.key = rd.Int16()
	hdr.version = rd.Int16()
	hdr.correlationID = rd.Int32()
	if !rd.Ok() {
		return hdr, false
	}
	if id := rd.NullableString(); id != nil {
		hdr.clientID = *id
	}
	return hdr, rd.Ok()
}

// peekRequestHeader reads what it can of a request header from the first
// bytes of a frame, for logging a request that is refused unread, and
// reports whether it got as far as the client ID.
func peekRequestHeader(prefix []byte) (requestHeader, bool) {
	return readRequestHeader(&kbin.Reader{Src: prefix})
}
