package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/record"
)

// offsetsStore is __consumer_offsets: where every group's records are
// appended and, at start, read back.
type offsetsStore struct {
	topic *broker.Topic
	now   func() time.Time

	mu sync.Mutex
	// unreadable holds why each partition that could not be read to its
	// end when loaded failed; its groups are not loaded and stay
	// unavailable.
	unreadable map[int32]error
	// In a cluster (leadership.go): the partitions whose groups this node
	// serves, and those being loaded.
	clustered bool
	loads     *broker.LeaderLoads
}

// parts are the topic's partitions as they are now: a reassignment
// (broker/reassign.go) replaces a partition that gains or loses its
// replica here, and its leadership is the new one's.
func (s *offsetsStore) parts() []*broker.Partition { return s.topic.Partitions() }

// maxBatchBytes keeps each appended batch well under the broker's default
// max.message.bytes (1 MiB); a commit of many partitions is split.
const maxBatchBytes = 512 << 10

// openStore finds or creates __consumer_offsets.
func openStore(b *broker.Broker, cfg Config) (*offsetsStore, error) {
	t, err := b.Topic(OffsetsTopic)
	if errors.Is(err, broker.ErrUnknownTopic) {
		t, err = createOffsetsTopic(b, cfg.OffsetsTopicPartitions)
	}
	if err != nil {
		return nil, fmt.Errorf("group: %s: %w", OffsetsTopic, err)
	}
	if len(t.Partitions()) == 0 {
		return nil, fmt.Errorf("group: %s has no partitions", OffsetsTopic)
	}
	return &offsetsStore{topic: t, now: cfg.Now, unreadable: map[int32]error{},
		clustered: b.Clustered(), loads: broker.NewLeaderLoads()}, nil
}

// createOffsetsTopic creates the topic compacted, as Kafka does: only the
// latest record of each key (offset or group) matters.
func createOffsetsTopic(b *broker.Broker, partitions int32) (*broker.Topic, error) {
	t, err := b.CreateInternalTopic(broker.TopicSpec{
		Name:       OffsetsTopic,
		Partitions: partitions,
		Configs:    map[string]string{"cleanup.policy": "compact", "segment.bytes": offsetsSegmentBytes},
	})
	if errors.Is(err, broker.ErrTopicExists) {
		return b.Topic(OffsetsTopic)
	}
	return t, err
}

// available reports whether the groups of a partition can be served: not
// while the partition is offline (damage found at start or by the broker's
// scrubber since) or could not be read at start. Kafka answers the same
// while a coordinator partition is not loaded. In a cluster, only by the
// partition's leader, once it loaded them in its current term: another
// node is NOT_COORDINATOR, and the leader while it loads
// COORDINATOR_LOAD_IN_PROGRESS.
func (s *offsetsStore) available(partition int32) error {
	if err := s.usable(partition); err != nil || !s.clustered {
		return err
	}
	servedTerm, served, loading := s.loads.State(partition)
	p := s.parts()[partition]
	if loading {
		return fmt.Errorf("%w: loading the groups of %s-%d", ErrCoordinatorLoadInProgress, OffsetsTopic, partition)
	}
	if term, leading := p.Leading(); !served || !leading || term != servedTerm {
		return fmt.Errorf("%w: this node does not lead %s-%d", ErrNotCoordinator, OffsetsTopic, partition)
	}
	return nil
}

// usable reports whether partition can be written and read here: not
// while it is offline or could not be read when loaded.
func (s *offsetsStore) usable(partition int32) error {
	err := s.unreadableErr(partition)
	if err == nil {
		err = s.parts()[partition].Offline()
	}
	if err != nil {
		return fmt.Errorf("%w: %s-%d is unavailable: %v", ErrCoordinatorNotAvailable, OffsetsTopic, partition, err)
	}
	return nil
}

// partitionFor is the partition holding a group's records: Kafka's
// Utils.abs(groupId.hashCode()) % partitions, so a group lands where it
// would on Kafka with the same partition count.
func (s *offsetsStore) partitionFor(group string) int32 {
	return partitionForGroup(group, int32(len(s.parts())))
}

func partitionForGroup(group string, n int32) int32 {
	h := javaStringHash(group)
	if h == -1<<31 {
		h = 0 // Utils.abs maps Integer.MIN_VALUE to 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// javaStringHash is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1]
// over the UTF-16 code units, in int32 arithmetic.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 { // a surrogate pair in UTF-16
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// append writes records to a partition, in batches that fit the broker's
// limits, and returns once they are written (and, when durable, fsynced).
func (s *offsetsStore) append(partition int32, recs []record.Record, durable bool) error {
	acks := int16(1)
	if durable {
		acks = -1
	}
	now := s.now().UnixMilli()
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) {
			size += len(recs[n].Key) + len(recs[n].Value) + 32
			if n > 0 && size > maxBatchBytes {
				break
			}
			n++
		}
		batch := record.NewBatch(now, recs[:n])
		if _, _, err := s.parts()[partition].Produce(batch, acks); err != nil {
			return storeError(err)
		}
		recs = recs[n:]
	}
	return nil
}

// storeError maps a failed append to what a group client should hear, as
// Kafka does: too large is the client's fault, anything else makes it
// retry against the coordinator.
func storeError(err error) error {
	if errors.Is(err, broker.ErrRecordTooLarge) || errors.Is(err, broker.ErrBatchTooLarge) {
		return fmt.Errorf("%w: %v", ErrInvalidCommitOffsetSize, err)
	}
	if errors.Is(err, broker.ErrNotLeader) {
		// Leadership of the partition moved: so did the coordinator.
		return fmt.Errorf("%w: %v", ErrNotCoordinator, err)
	}
	return fmt.Errorf("%w: writing %s: %v", ErrCoordinatorNotAvailable, OffsetsTopic, err)
}

// replayed is one record read back: its producer id is -1 unless a
// transaction wrote it (TxnOffsetCommit), in which case it counts only once
// a COMMIT marker of that producer follows.
type replayed struct {
	rec        decodedRecord
	ts         time.Time
	partition  int32
	producerID int64
}

// replayHandler receives what replay reads, in offset order: records, and
// transaction markers (producer id, commit or abort) of a partition.
type replayHandler struct {
	record func(r replayed)
	marker func(partition int32, producerID int64, commit bool)
	bad    func(offset int64, err error)
}

// replay reads partitions from their start and hands each record and
// marker to h in offset order. A record that does not decode goes to bad
// and is skipped: one bad record must not cost every group. A partition
// that cannot be read to its end (offline, or a batch that fails its
// check) is noted in s.unreadable and the others are still read: one
// damaged partition must not cost the groups of the others.
func (s *offsetsStore) replay(partitions []int32, h replayHandler) {
	for _, i := range partitions {
		err := replayPartition(s.parts()[i], h)
		s.mu.Lock()
		if err != nil {
			s.unreadable[i] = err
		} else {
			delete(s.unreadable, i)
		}
		s.mu.Unlock()
	}
}

// unreadableErr is why partition could not be read when last loaded, or
// nil.
func (s *offsetsStore) unreadableErr(partition int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unreadable[partition]
}

func replayPartition(p *broker.Partition, rh replayHandler) error {
	return p.ReadRecords(p.StartOffset(), func(h record.Header, recs []record.Record) error {
		replayBatch(h, recs, p.Index(), rh)
		return nil
	})
}

// replayBatch hands the records of one batch to rh: a control batch as a
// marker, any other record by record.
func replayBatch(h record.Header, recs []record.Record, partition int32, rh replayHandler) {
	if h.Control() {
		// Kafka's control record key: version int16, type int16 (0 ABORT,
		// 1 COMMIT).
		if len(recs) > 0 && len(recs[0].Key) >= 4 {
			rh.marker(partition, h.ProducerID, binary.BigEndian.Uint16(recs[0].Key[2:4]) == 1)
		}
		return
	}
	producerID := int64(-1)
	if h.Transactional() {
		producerID = h.ProducerID
	}
	for _, r := range recs {
		ts := h.BaseTimestamp + r.TimestampDelta
		if h.LogAppendTime() {
			ts = h.MaxTimestamp
		}
		d, err := decodeRecord(r.Key, r.Value)
		if err != nil {
			rh.bad(h.BaseOffset+int64(r.OffsetDelta), err)
			continue
		}
		if !d.unknown {
			rh.record(replayed{rec: d, ts: time.UnixMilli(ts), partition: partition, producerID: producerID})
		}
	}
}
