package kafka

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Hostile request frames (without the size prefix) of about size bytes,
// built to make kmsg allocate as much as it can: array counts as large as
// the bytes left allow, nested so that each claims the rest of the frame
// again, and a last section of distinct unknown tagged fields.

func hostileHeader(key, version int16) []byte {
	b := kbin.AppendInt16(nil, key)
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, 1)
	b = kbin.AppendNullableString(b, nil)
	return append(b, 0) // flexible: empty header tags
}

// appendClaim appends a compact array count claiming the bytes left up to
// size at minBytes per element, as many as kmsg lets through once the
// frame is filled to within 8 bytes of size.
func appendClaim(b []byte, size, minBytes int) []byte {
	return kbin.AppendUvarint(b, uint32((size-len(b)-16)/minBytes)+1)
}

// appendTags fills b up to size (less up to 8 bytes) with distinct, empty
// tagged fields: 3-byte keys from 2^14, so size is at most about 8 MiB.
func appendTags(b []byte, size int) []byte {
	count := (size - len(b) - 4) / 4 // 3-byte key, 1-byte size
	b = kbin.AppendUvarint(b, uint32(count))
	for key := range uint32(count) {
		b = kbin.AppendUvarint(b, 1<<14+key)
		b = append(b, 0)
	}
	return b
}

// hostileOffsetFetch is the worst we found: OffsetFetch v8 claims groups,
// the first group claims topics, the first topic's tags fill the rest.
func hostileOffsetFetch(size int) []byte {
	b := hostileHeader(int16(kmsg.OffsetFetch), 8)
	b = appendClaim(b, size, 3)
	b = append(b, 1) // group ""
	b = appendClaim(b, size, 2)
	b = append(b, 1, 1) // topic "", no partitions
	return appendTags(b, size)
}

// hostileProduce: Produce v9 claims topics, the first claims partitions,
// the first partition's tags fill the rest.
func hostileProduce(size int) []byte {
	b := hostileHeader(int16(kmsg.Produce), 9)
	b = append(b, 0)            // no transactional ID
	b = kbin.AppendInt16(b, 1)  // acks
	b = kbin.AppendInt32(b, 10) // timeout
	b = appendClaim(b, size, 2)
	b = append(b, 1) // topic ""
	b = appendClaim(b, size, 6)
	b = kbin.AppendInt32(b, 0)
	b = append(b, 0) // null records
	return appendTags(b, size)
}

// sparseProduce is a valid Produce v9 request of empty topics: it decodes,
// into 21 times its size.
func sparseProduce(size int) []byte {
	b := hostileHeader(int16(kmsg.Produce), 9)
	b = append(b, 0)
	b = kbin.AppendInt16(b, 1)
	b = kbin.AppendInt32(b, 10)
	n := (size - len(b) - 10) / 3
	b = kbin.AppendUvarint(b, uint32(n)+1)
	for range n {
		b = append(b, 1, 1, 0) // topic "", no partitions, no tags
	}
	return append(b, 0)
}

// taggedApiVersions is a valid ApiVersions v3 request full of unknown
// tagged fields: any flexible request can be made so.
func taggedApiVersions(size int) []byte {
	b := hostileHeader(int16(kmsg.ApiVersions), 3)
	b = append(b, 1, 1) // empty software name and version
	return appendTags(b, size)
}

// walkProduce runs produceDecodeSize on a produce request frame.
func walkProduce(frame []byte) int64 {
	rd := kbin.Reader{Src: frame}
	hdr, _ := readRequestHeader(&rd)
	if hdr.version >= 9 {
		kmsg.SkipTags(&rd)
	}
	return produceDecodeSize(rd.Src, hdr.version)
}

// decodeAllocs is what decodeRequest allocates for frame, in bytes.
func decodeAllocs(frame []byte) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	decodeRequest(frame)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Every hostile frame kmsg would decode allocates at most
// maxDecodeAmplification times its size, and the produce ones are refused
// before kmsg sees them; produceDecodeSize's estimate is within a factor
// of 2 of what kmsg allocates for them. This pins the measured numbers in
// request_cost.go: a kmsg upgrade that changes them fails here.
func TestDecodeAmplification(t *testing.T) {
	if raceEnabled {
		// Race instrumentation keeps the compiler from folding kmsg's
		// append(a, make(...)...), doubling what arrays allocate.
		t.Skip("allocations differ under the race detector")
	}
	const size = 1 << 20
	for _, tc := range []struct {
		name     string
		frame    []byte
		produce  bool
		minRatio float64 // what the frame was built to reach
	}{
		{"OffsetFetch v8 groups, topics, tags", hostileOffsetFetch(size), false, 90},
		{"ApiVersions v3 tags", taggedApiVersions(size), false, 35},
		{"Produce v9 topics, partitions, tags", hostileProduce(size), true, 75},
		{"Produce v9 empty topics", sparseProduce(size), true, 20},
	} {
		allocs := decodeAllocs(tc.frame)
		ratio := float64(allocs) / float64(len(tc.frame))
		t.Logf("%s: %d-byte frame, kmsg allocates %d bytes (%.1f times)", tc.name, len(tc.frame), allocs, ratio)
		if ratio < tc.minRatio {
			t.Errorf("%s: only %.1f times, not %.0f: the frame no longer tests what it should", tc.name, ratio, tc.minRatio)
		}
		cost, err := decodeCost(tc.frame)
		if !tc.produce {
			if ratio > maxDecodeAmplification {
				t.Errorf("%s: decoding allocates %.1f times the frame, more than maxDecodeAmplification (%d)", tc.name, ratio, maxDecodeAmplification)
			}
			if cost != int64(len(tc.frame))*maxDecodeAmplification || err != nil {
				t.Errorf("%s: decodeCost = %d, %v", tc.name, cost, err)
			}
			continue
		}
		if !errors.Is(err, errProduceTooSparse) {
			t.Errorf("%s: decodeCost = %d, %v; want errProduceTooSparse", tc.name, cost, err)
		}
		if est := walkProduce(tc.frame); uint64(est) < allocs/2 || uint64(est) > 2*allocs {
			t.Errorf("%s: produceDecodeSize estimates %d bytes, kmsg allocates %d", tc.name, est, allocs)
		}
	}
}

// shapedProduce builds a produce request of the given shape at version v,
// with a batch of batchBytes in every partition, and its expected decode
// size.
func shapedProduce(t *testing.T, v int16, topics, partitions, tags, batchBytes int) (frame []byte, want int64) {
	req := kmsg.NewPtrProduceRequest()
	req.Version = v
	req.Acks = -1
	txn := "txn-1"
	req.TransactionID = &txn
	want = int64(len(txn))
	batch := buildBatch(t, string(make([]byte, batchBytes)))
	for i := range topics {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = fmt.Sprintf("topic-%d", i)
		rt.TopicID = [16]byte{byte(i + 1)}
		if v < 13 {
			want += int64(len(rt.Topic))
		}
		for p := range partitions {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = int32(p), batch
			if v >= 9 {
				for k := range tags {
					rp.UnknownTags.Set(uint32(100+k), []byte{1})
				}
				want += int64(tags) * unknownTagSize
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	want += int64(topics)*produceTopicSize + int64(topics*partitions)*producePartitionSize
	frame = kmsg.NewRequestFormatter(kmsg.FormatterClientID("shape")).AppendRequest(nil, req, 1)[4:]
	return frame, want
}

// produceDecodeSize counts exactly what kmsg allocates per topic,
// partition, string and tag at every version Wharf serves; decodeCost
// uses it for requests from produceWalkMin bytes, which cost little beyond
// their frame, and charges smaller ones like any other request.
func TestProduceDecodeSize(t *testing.T) {
	for v := apiVersions[kmsg.Produce].min; v <= apiVersions[kmsg.Produce].max; v++ {
		for _, shape := range [][3]int{{1, 1, 0}, {3, 7, 0}, {50, 4, 1}} {
			frame, want := shapedProduce(t, v, shape[0], shape[1], shape[2], 100)
			if got := walkProduce(frame); got != want {
				t.Errorf("v%d %v: produceDecodeSize = %d, want %d", v, shape, got, want)
			}
			if cost, err := decodeCost(frame); err != nil || cost != int64(len(frame))*maxDecodeAmplification {
				t.Errorf("v%d %v: decodeCost of a small request = %d, %v", v, shape, cost, err)
			}
			if raceEnabled {
				continue // the race detector's allocator counts differently
			}
			// The slack: the request struct, the client ID, and
			// allocations elsewhere in the process meanwhile.
			if allocs := decodeAllocs(frame); uint64(want)+4096 < allocs {
				t.Errorf("v%d %v: estimated %d bytes, kmsg allocated %d", v, shape, want, allocs)
			}
		}
		frame, want := shapedProduce(t, v, 2, 4, 0, produceWalkMin/8)
		if cost, err := decodeCost(frame); err != nil || cost != want {
			t.Errorf("v%d: decodeCost of a %d-byte request = %d, %v; want %d", v, len(frame), cost, err, want)
		}
	}
}

// checkProduceDecodeSize is FuzzDecodeRequest's check of the produce
// skeleton walk against kmsg: for every produce request kmsg decodes, the
// walk counts the same topics, partitions and strings, and every tag
// (kmsg keeps one per distinct key).
func checkProduceDecodeSize(t *testing.T, frame []byte, req *kmsg.ProduceRequest) {
	want := int64(len(req.Topics)) * produceTopicSize
	if req.TransactionID != nil {
		want += int64(len(*req.TransactionID))
	}
	tags := req.UnknownTags.Len()
	for _, rt := range req.Topics {
		if req.Version < 13 {
			want += int64(len(rt.Topic))
		}
		want += int64(len(rt.Partitions)) * producePartitionSize
		tags += rt.UnknownTags.Len()
		for _, rp := range rt.Partitions {
			tags += rp.UnknownTags.Len()
		}
	}
	want += int64(tags) * unknownTagSize
	got := walkProduce(frame)
	if diff := got - want; diff < 0 || diff%unknownTagSize != 0 {
		t.Fatalf("produceDecodeSize = %d; kmsg decoded %d topics into %d bytes", got, len(req.Topics), want)
	}
}
