package kafkaview

import (
	"fmt"

	"github.com/wharf-mq/wharf/internal/record"
)

// ProduceRequest is one record to produce. Key, Value and header values
// are text; a nil Key or Value is null (a null value is a tombstone).
type ProduceRequest struct {
	// Partition is where the record goes; nil or negative: chosen as
	// Kafka's default partitioner does, by the key's murmur2 hash, or
	// round-robin for a record without a key.
	Partition *int32       `json:"partition"`
	Key       *string      `json:"key"`
	Value     *string      `json:"value"`
	Headers   []TextHeader `json:"headers"`
}

// TextHeader is a record header given as text.
type TextHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ProduceResult says where the record went.
type ProduceResult struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	Timestamp int64 `json:"timestamp"`
}

// Produce appends one record to a topic with acks=all: it returns once
// the record is as durable as the broker's fsync policy makes an acks=all
// write. Internal topics are refused, as Kafka refuses clients.
func (v *View) Produce(topic string, req ProduceRequest) (ProduceResult, error) {
	t, err := v.topic(topic)
	if err != nil {
		return ProduceResult{}, err
	}
	if t.Internal() {
		return ProduceResult{}, fmt.Errorf("%w: %s is an internal topic", ErrInvalid, topic)
	}
	rec := record.Record{}
	if req.Key != nil {
		rec.Key = []byte(*req.Key)
	}
	if req.Value != nil {
		rec.Value = []byte(*req.Value)
	}
	for _, h := range req.Headers {
		rec.Headers = append(rec.Headers, record.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
	}
	n := int32(len(t.Partitions()))
	index := int32(-1)
	switch {
	case req.Partition != nil && *req.Partition >= 0:
		index = *req.Partition
	case rec.Key != nil:
		index = int32(murmur2(rec.Key)&0x7fffffff) % n
	default:
		index = int32(v.unkeyed.Add(1) % uint32(n))
	}
	p, err := v.partition(topic, index)
	if err != nil {
		return ProduceResult{}, err
	}
	now := v.now().UnixMilli()
	offset, appendTime, err := p.Produce(record.NewBatch(now, []record.Record{rec}), -1)
	if err != nil {
		return ProduceResult{}, err
	}
	if appendTime >= 0 {
		now = appendTime
	}
	return ProduceResult{Partition: index, Offset: offset, Timestamp: now}, nil
}

// murmur2 is the hash Kafka's default partitioner places keyed records
// with (Utils.murmur2), so a record produced here lands where a Java,
// franz-go or librdkafka (murmur2_random) client would put the same key.
func murmur2(data []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(data))
	for len(data) >= 4 {
		k := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
