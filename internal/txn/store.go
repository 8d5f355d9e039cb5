package txn

import (
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/record"
)

// StateTopic is Kafka's internal topic of transaction state. Its records
// use Kafka's encoding: key TxnMetadataKey v0 (transactional id), value
// TxnMetadataValue v0 (producer id and epoch, timeout, state, partitions,
// timestamps). The topic is compacted: the latest record of an id is its
// state.
const StateTopic = "__transaction_state"

// stateStore is __transaction_state: every state change of a transaction
// is appended durably before it is answered; start-up reads it back.
type stateStore struct {
	topic *broker.Topic

	mu sync.Mutex
	// unreadable holds why each partition that could not be read to its
	// end when loaded failed; its ids are not loaded and stay unavailable.
	unreadable map[int32]error
	// In a cluster (leadership.go): the partitions whose ids this node
	// coordinates, and those being loaded.
	clustered bool
	loads     *broker.LeaderLoads
}

// openStore finds __transaction_state, creating it with partitions
// unless it only looks (create false: ErrUnknownTopic when missing).
func openStore(b *broker.Broker, partitions int32, create bool) (*stateStore, error) {
	t, err := b.Topic(StateTopic)
	if errors.Is(err, broker.ErrUnknownTopic) && create {
		t, err = b.CreateInternalTopic(broker.TopicSpec{
			Name:       StateTopic,
			Partitions: partitions,
			Configs:    map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"},
		})
		if errors.Is(err, broker.ErrTopicExists) {
			t, err = b.Topic(StateTopic)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("txn: %s: %w", StateTopic, err)
	}
	if len(t.Partitions()) == 0 {
		return nil, fmt.Errorf("txn: %s has no partitions", StateTopic)
	}
	return &stateStore{topic: t, unreadable: map[int32]error{},
		clustered: b.Clustered(), loads: broker.NewLeaderLoads()}, nil
}

func (s *stateStore) partitionFor(id string) *broker.Partition {
	parts := s.parts()
	return parts[crc32.ChecksumIEEE([]byte(id))%uint32(len(parts))]
}

// parts are the topic's partitions as they are now: a reassignment
// (broker/reassign.go) replaces a partition that gains or loses its
// replica here, and its leadership is the new one's.
func (s *stateStore) parts() []*broker.Partition { return s.topic.Partitions() }

// usable reports whether the id's partition can be used here: not while
// it is offline (damage found at start or by the broker's scrubber since)
// or could not be read when loaded. Kafka answers the same while a
// coordinator partition is not loaded.
func (s *stateStore) usable(id string) error {
	p := s.partitionFor(id)
	s.mu.Lock()
	err := s.unreadable[p.Index()]
	s.mu.Unlock()
	if err == nil {
		err = p.Offline()
	}
	if err != nil {
		return fmt.Errorf("%w: %s-%d is unavailable: %v", ErrCoordinatorNotAvailable, StateTopic, p.Index(), err)
	}
	return nil
}

// available reports whether this node coordinates the id now: its
// partition is usable and, in a cluster, led here and loaded in the
// current term (NOT_COORDINATOR on another node,
// COORDINATOR_LOAD_IN_PROGRESS while loading).
func (s *stateStore) available(id string) error {
	if err := s.usable(id); err != nil || !s.clustered {
		return err
	}
	p := s.partitionFor(id)
	servedTerm, served, loading := s.loads.State(p.Index())
	if loading {
		return fmt.Errorf("%w: loading the transactional ids of %s-%d", ErrCoordinatorLoadInProgress, StateTopic, p.Index())
	}
	if term, leading := p.Leading(); !served || !leading || term != servedTerm {
		return fmt.Errorf("%w: this node does not lead %s-%d", ErrNotCoordinator, StateTopic, p.Index())
	}
	return nil
}

// append appends the transaction's current state and returns what waits
// until it is durable (acks=all: group-committed with concurrent writes).
func (s *stateStore) append(t *txn, now time.Time) (wait func() error, err error) {
	key := kmsg.NewTxnMetadataKey()
	key.TransactionalID = t.id
	val := kmsg.NewTxnMetadataValue()
	val.ProducerID, val.ProducerEpoch = t.producerID, t.epoch
	val.TimeoutMillis = int32(t.timeout / time.Millisecond)
	val.State = t.state
	for _, topic := range slices.Sorted(maps.Keys(t.partitions)) {
		vt := kmsg.NewTxnMetadataValueTopic()
		vt.Topic = topic
		vt.Partitions = slices.Sorted(maps.Keys(t.partitions[topic]))
		val.Topics = append(val.Topics, vt)
	}
	val.LastUpdateTimestamp = now.UnixMilli()
	val.StartTimestamp = -1
	if !t.started.IsZero() {
		val.StartTimestamp = t.started.UnixMilli()
	}
	batch := record.NewBatch(now.UnixMilli(), []record.Record{{Key: key.AppendTo(nil), Value: val.AppendTo(nil)}})
	_, _, durable, err := s.partitionFor(t.id).ProduceAsync(batch, -1)
	if err != nil {
		return nil, writeError(err)
	}
	t.updated = now
	return func() error {
		if err := durable(); err != nil {
			return writeError(err)
		}
		return nil
	}, nil
}

// writeTombstone appends the id's tombstone (a null value), which removes
// it at load and, once the topic is compacted, from the log.
func (s *stateStore) writeTombstone(id string, now time.Time) error {
	key := kmsg.NewTxnMetadataKey()
	key.TransactionalID = id
	batch := record.NewBatch(now.UnixMilli(), []record.Record{{Key: key.AppendTo(nil)}})
	if _, _, err := s.partitionFor(id).Produce(batch, -1); err != nil {
		return writeError(err)
	}
	return nil
}

// writeError is what a failed write of __transaction_state answers: the
// coordinator moved if the partition's leadership did.
func writeError(err error) error {
	if errors.Is(err, broker.ErrNotLeader) {
		return fmt.Errorf("%w: writing %s: %v", ErrNotCoordinator, StateTopic, err)
	}
	return fmt.Errorf("%w: writing %s: %v", ErrCoordinatorNotAvailable, StateTopic, err)
}

// load reads partitions and returns the latest state of each of their
// ids. A partition that cannot be read to its end (offline, or a batch
// that fails its check) is noted in s.unreadable and none of its ids is
// returned: one damaged partition must not cost the ids of the others.
func (s *stateStore) load(partitions []*broker.Partition) map[string]*txn {
	out := map[string]*txn{}
	for _, p := range partitions {
		ids := map[string]*txn{}
		err := loadPartition(p, ids)
		s.mu.Lock()
		if err != nil {
			s.unreadable[p.Index()] = err
		} else {
			delete(s.unreadable, p.Index())
		}
		s.mu.Unlock()
		if err == nil {
			maps.Copy(out, ids)
		}
	}
	return out
}

func loadPartition(p *broker.Partition, out map[string]*txn) error {
	return p.ReadRecords(p.StartOffset(), func(h record.Header, recs []record.Record) error {
		if h.Control() {
			return nil
		}
		for _, r := range recs {
			applyRecord(out, r)
		}
		return nil
	})
}

// applyRecord applies one record of __transaction_state; records of other
// key versions are skipped.
func applyRecord(out map[string]*txn, r record.Record) {
	var key kmsg.TxnMetadataKey
	if key.ReadFrom(r.Key) != nil || key.Version != 0 {
		return
	}
	if r.Value == nil {
		delete(out, key.TransactionalID)
		return
	}
	var val kmsg.TxnMetadataValue
	if val.ReadFrom(r.Value) != nil {
		return
	}
	t := &txn{
		id:         key.TransactionalID,
		producerID: val.ProducerID,
		epoch:      val.ProducerEpoch,
		timeout:    time.Duration(val.TimeoutMillis) * time.Millisecond,
		state:      val.State,
		partitions: map[string]map[int32]bool{},
		updated:    time.UnixMilli(val.LastUpdateTimestamp),
	}
	if val.StartTimestamp >= 0 {
		t.started = time.UnixMilli(val.StartTimestamp)
	}
	for _, vt := range val.Topics {
		for _, p := range vt.Partitions {
			t.addPartition(vt.Topic, p)
		}
	}
	out[t.id] = t
}
