package streambridge

import (
	"errors"
	"fmt"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Topics is mq.StreamStore over a broker's topics: a stream queue is a
// topic of one partition.
type Topics struct{ b *broker.Broker }

// NewTopics returns the StreamStore of stream queues kept in b's topics.
func NewTopics(b *broker.Broker) Topics { return Topics{b} }

// CreateStream creates the topic with one partition and the stream's
// retention configs, or opens it as it is if it exists.
func (t Topics) CreateStream(name string, cfg mq.StreamConfig) (mq.Stream, error) {
	_, err := t.b.CreateTopic(broker.TopicSpec{Name: name, Partitions: 1, Configs: cfg.TopicConfigs()}, false)
	if err != nil && !errors.Is(err, broker.ErrTopicExists) {
		return nil, err
	}
	return t.OpenStream(name)
}

// OpenStream opens an existing topic of one partition.
func (t Topics) OpenStream(name string) (mq.Stream, error) {
	topic, err := t.b.Topic(name)
	if errors.Is(err, broker.ErrUnknownTopic) {
		return nil, fmt.Errorf("%w: %v", mq.ErrStreamNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	if n := len(topic.Partitions()); n != 1 {
		return nil, fmt.Errorf("%w: topic %q has %d partitions", mq.ErrNotAStream, name, n)
	}
	p, err := topic.Partition(0)
	if err != nil {
		return nil, err
	}
	return stream{p}, nil
}

// DeleteStream deletes the topic, which the Kafka core refuses its own
// clients while the queue exists; a missing one is not an error.
func (t Topics) DeleteStream(name string) error { return t.b.DeleteTopicInUse(name) }

// stream is mq.Stream over partition 0 of a stream queue's topic.
type stream struct{ p *broker.Partition }

// Append produces with acks=1: no fsync here, mq's syncer calls Sync for
// publisher confirms (group commit).
func (s stream) Append(batch []byte) (int64, error) {
	off, _, err := s.p.Produce(batch, 1)
	return off, err
}

// Sync fsyncs the partition's log; a closed log (the topic deleted, the
// broker stopped) is an error.
func (s stream) Sync() error { return s.p.Sync() }

func (s stream) Read(offset, maxBytes int64) (*replica.Slice, error) {
	return s.p.Read(offset, maxBytes)
}
func (s stream) StartOffset() int64          { return s.p.StartOffset() }
func (s stream) EndOffset() int64            { return s.p.EndOffset() }
func (s stream) Notify(ch chan<- struct{})   { s.p.Notify(ch) }
func (s stream) Unnotify(ch chan<- struct{}) { s.p.Unnotify(ch) }

func (s stream) OffsetForTime(ts int64) (int64, bool, error) {
	off, _, found, err := s.p.OffsetForTime(ts)
	return off, found, err
}
