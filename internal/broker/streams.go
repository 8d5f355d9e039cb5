package broker

import (
	"errors"
	"fmt"

	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// streamStore is mq.StreamStore over the broker's topics: an AMQP stream
// queue is a topic of one partition, so Kafka clients read and write the
// same log.
type streamStore struct{ b *Broker }

// CreateStream creates the topic with one partition and the stream's
// retention configs, or opens it as it is if it exists.
func (s streamStore) CreateStream(name string, cfg mq.StreamConfig) (mq.Stream, error) {
	_, err := s.b.CreateTopic(TopicSpec{Name: name, Partitions: 1, Configs: cfg.TopicConfigs()}, false)
	if err != nil && !errors.Is(err, ErrTopicExists) {
		return nil, err
	}
	return s.OpenStream(name)
}

// OpenStream opens an existing topic of one partition.
func (s streamStore) OpenStream(name string) (mq.Stream, error) {
	t, err := s.b.Topic(name)
	if errors.Is(err, ErrUnknownTopic) {
		return nil, fmt.Errorf("%w: %v", mq.ErrStreamNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	if n := len(t.Partitions()); n != 1 {
		return nil, fmt.Errorf("%w: topic %q has %d partitions", mq.ErrNotAStream, name, n)
	}
	p, err := t.Partition(0)
	if err != nil {
		return nil, err
	}
	return stream{p}, nil
}

// DeleteStream deletes the topic, which DeleteTopic refuses while the
// queue exists; a missing one is not an error.
func (s streamStore) DeleteStream(name string) error {
	s.b.adminMu.Lock()
	defer s.b.adminMu.Unlock()
	t, err := s.b.Topic(name)
	if errors.Is(err, ErrUnknownTopic) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.b.deleteTopicLocked(t)
}

// stream is mq.Stream over partition 0 of a stream queue's topic.
type stream struct{ p *Partition }

// Append produces with acks=1: no fsync here, mq's syncer calls Sync for
// publisher confirms (group commit).
func (s stream) Append(batch []byte) (int64, error) {
	off, _, err := s.p.Produce(batch, 1)
	return off, err
}

// Sync fsyncs the partition's log. A closed log is an error, not a
// success: closed because the topic was deleted or the broker stopped, it
// can no longer say whether what was appended reached the disk, and a
// confirm must not claim it did.
func (s stream) Sync() error {
	log, err := s.p.online()
	if err != nil {
		return err
	}
	if err := log.Sync(); err != nil {
		return s.p.storageError("sync", err)
	}
	return nil
}

func (s stream) Read(offset, maxBytes int64) (*seglog.Slice, error) {
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
