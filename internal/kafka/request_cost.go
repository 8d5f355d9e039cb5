package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decoding a request with kmsg allocates its Go form before the bytes that
// fill it are checked: an array is made as long as its declared count,
// which kmsg only compares with the bytes left times the smallest encoding
// of one element (two bytes for an element of 64), and every unknown tagged
// field becomes a map entry (about 40 bytes allocated per 4-byte tag). A
// count that fails inside the first element leaves the rest of the frame
// for the next, nested, count. The worst frames we built for the APIs Wharf
// serves allocate 93 times their size (OffsetFetch v8: groups, then
// topics, then tags), Produce v9 79 times, any flexible request 40 times
// through its tags (TestDecodeAmplification measures them). Without a bound
// one 100 MiB request could make the server allocate over 9 GiB.
//
// So every request but Produce is held to MaxNonProduceRequestBytes (1 MiB
// by default) and, while kmsg decodes it, charged maxDecodeAmplification
// times its size against the server's request budget (request_budget.go).
// Produce keeps the full socket.request.max.bytes, since its records are
// the point of the request: decoding a Produce request allocates nothing
// for the records (they stay in the frame), and from produceWalkMin bytes
// produceDecodeSize counts what decoding it would allocate before kmsg
// does; a produce request that would decode into more than twice its size
// is refused.
//
// The charge ends with decoding. A request that decodes is then held while
// it is served, at most 2 times its size for Produce and 40 times for the
// others (a valid request full of empty elements or tags), so at most
// 40 MiB per connection with the default limit.
const maxDecodeAmplification = 96

// Go sizes of what kmsg allocates per produce topic, partition and
// unknown tag. A struct's first tag makes a map of its own (about 300
// bytes); further ones cost about 160 bytes each with the map's growth.
const (
	produceTopicSize     = int64(unsafe.Sizeof(kmsg.ProduceRequestTopic{}))
	producePartitionSize = int64(unsafe.Sizeof(kmsg.ProduceRequestTopicPartition{}))
	unknownTagSize       = 320
)

// maxProduceDecodeSlack is what a produce request may decode into beyond
// twice its size. Real requests decode into far less than their size (a
// partition's record batch, 70 bytes or more, becomes 40 bytes of Go struct
// and the batch stays in the frame); the slack covers tests and tools that
// send a few partitions without records.
const maxProduceDecodeSlack = 64 << 10

// errProduceTooSparse is a produce request whose decoded form would be out
// of proportion to its size: many topics or partitions with (almost) no
// bytes each, or many tagged fields. No client sends one.
var errProduceTooSparse = errors.New("produce request declares too many topics, partitions or tagged fields for its size")

// requestLimit is the largest request of API key the server accepts.
func (s *Server) requestLimit(key int16) int32 {
	if key == int16(kmsg.Produce) {
		return s.cfg.MaxRequestBytes
	}
	return s.cfg.MaxNonProduceRequestBytes
}

// produceWalkMin is the size from which a produce request's skeleton is
// walked (produceDecodeSize); a smaller one is charged like any other
// request, at most 6 MiB, which saves the walk on the small requests
// where it would cost the most relative to the rest.
const produceWalkMin = 64 << 10

// decodeCost is the most that decoding frame with kmsg may allocate,
// charged to the request budget while it decodes. A produce request from
// produceWalkMin bytes that would decode into more than twice its size
// plus maxProduceDecodeSlack is refused (errProduceTooSparse). A request
// that decodeRequest refuses before kmsg reads it (short header, unknown
// API, unsupported version) costs nothing.
func decodeCost(frame []byte) (int64, error) {
	size := int64(len(frame))
	if size < 4 {
		return 0, nil
	}
	key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
	if vr, known := supportedVersions(key); !known || version < vr.min || version > vr.max {
		return 0, nil
	}
	if key != int16(kmsg.Produce) || size < produceWalkMin {
		return size * maxDecodeAmplification, nil
	}
	rd := kbin.Reader{Src: frame}
	if _, ok := readRequestHeader(&rd); !ok {
		return 0, nil
	}
	if version >= 9 { // flexible: request header v2
		kmsg.SkipTags(&rd)
	}
	decoded := produceDecodeSize(rd.Src, version)
	if decoded > 2*size+maxProduceDecodeSlack {
		return 0, fmt.Errorf("%w: %d bytes would decode into about %d", errProduceTooSparse, size, decoded)
	}
	return decoded, nil
}

// produceDecodeSize walks the skeleton of a produce request body (Produce
// v3 to v13) with franz-go's reader, without allocating, and returns the
// bytes kmsg would allocate decoding it: the topic and partition structs,
// copies of the strings and the unknown tagged fields. It mirrors
// kmsg.ProduceRequest's decoder and stops where that would fail, so its
// count bounds what kmsg allocates before failing too.
func produceDecodeSize(body []byte, version int16) int64 {
	rd := kbin.Reader{Src: body}
	flexible := version >= 9 // as kmsg.ProduceRequest.IsFlexible
	var w produceWalk
	w.str(&rd, flexible, true) // transactional ID
	rd.Int16()                 // acks
	rd.Int32()                 // timeout
	topics := w.array(&rd, flexible, produceTopicSize)
	for i := int32(0); i < topics && rd.Ok(); i++ {
		if version >= 13 {
			rd.Uuid()
		} else {
			w.str(&rd, flexible, false)
		}
		partitions := w.array(&rd, flexible, producePartitionSize)
		for j := int32(0); j < partitions && rd.Ok(); j++ {
			rd.Int32() // partition
			if flexible {
				rd.CompactNullableBytes() // records: stay in the frame
			} else {
				rd.NullableBytes()
			}
			w.tags(&rd, flexible)
		}
		w.tags(&rd, flexible)
	}
	w.tags(&rd, flexible)
	return w.bytes
}

// produceWalk sums the allocation of a decode as produceDecodeSize reads.
type produceWalk struct{ bytes int64 }

// array reads an array count and adds count elements of elemSize: kmsg
// allocates them all before reading the first.
func (w *produceWalk) array(rd *kbin.Reader, flexible bool, elemSize int64) int32 {
	var n int32
	if flexible {
		n = rd.CompactArrayLen()
	} else {
		n = rd.ArrayLen()
	}
	if n > 0 && rd.Ok() {
		w.bytes += int64(n) * elemSize
	}
	return n
}

// str skips a string, adding its length: kmsg copies it.
func (w *produceWalk) str(rd *kbin.Reader, flexible, nullable bool) {
	var s *string
	switch {
	case flexible && nullable:
		s = rd.UnsafeCompactNullableString()
	case nullable:
		s = rd.UnsafeNullableString()
	case flexible:
		v := rd.UnsafeCompactString()
		s = &v
	default:
		v := rd.UnsafeString()
		s = &v
	}
	if s != nil {
		w.bytes += int64(len(*s))
	}
}

// tags skips a tagged-field section of a flexible version, adding each
// field: kmsg keeps the unknown ones (all of them, for Produce) in a map.
func (w *produceWalk) tags(rd *kbin.Reader, flexible bool) {
	if !flexible {
		return
	}
	for n := rd.Uvarint(); n > 0 && rd.Ok(); n-- {
		rd.Uvarint() // key
		rd.Span(int(rd.Uvarint()))
		w.bytes += unknownTagSize
	}
}
