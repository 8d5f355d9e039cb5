package broker

import (
	"bytes"
	"crypto/sha256"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/wharf-mq/wharf/internal/record"
)

// definitionPrefix marks the metadata records of the definition store.
const definitionPrefix = "def/"

// DefinitionStore is a durable key-value store kept in the broker's metadata
// log, for the state of other cores (AMQP exchanges, queues and bindings).
// Every change is fsynced before it returns; the newest value of each key is
// what Load sees after a restart.
type DefinitionStore struct {
	meta   *metadataLog
	logger *slog.Logger

	mu     sync.Mutex // serialises writers
	liveMu sync.Mutex // guards live: held apart from mu, as a cluster's apply loop sets live while a writer waits for it
	live   map[string][]byte

	// The stores kept here follow it (definitions_cluster.go).
	followMu  sync.Mutex          // held from a key's change until every follower heard of it, so they hear in log order
	followers map[string]follower // by key prefix
	barriers  barrierRounds
}

// Definitions returns the broker's definition store.
func (b *Broker) Definitions() *DefinitionStore { return b.defs }

// Put stores value under key durably.
func (s *DefinitionStore) Put(key string, value []byte) error {
	if value == nil {
		value = []byte{} // nil is the tombstone
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(key, value)
}

// PutIf stores value under key durably if, when the write is applied, key's
// live value is prev (prev nil: key has none); else the write is ignored,
// on every node alike (the metadata log's compare-and-set, decided as
// each node applies it, never by a read before the write). A write that
// records progress on a value read earlier (a quorum queue's membership
// change) so cannot bring back a key deleted meanwhile, or undo a newer
// value; one with prev nil creates key, and of two nodes creating it at
// once only the first applied does (a declaration of a new durable queue
// or exchange). It returns once this node applied (or ignored) it: Get
// tells which. In a cluster the key's followers hear of an ignored one
// too, with the value as it stays.
func (s *DefinitionStore) PutIf(key string, value, prev []byte) error {
	if value == nil {
		value = []byte{}
	}
	var cond []byte // empty: key must have no value
	if prev != nil {
		sum := sha256.Sum256(prev)
		cond = sum[:]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(key, value, record.RecordHeader{Key: definitionIfHeader, Value: cond})
}

// definitionIfHeader is the header of a PutIf record: the SHA-256 of the
// value its key must have for the record to apply, or empty if the key
// must have none.
const definitionIfHeader = "def-if"

// definitionApplies reports whether a definition record with headers
// applies to its key, whose live value is live (ok false: none).
func definitionApplies(headers []record.RecordHeader, live []byte, ok bool) bool {
	for _, h := range headers {
		if h.Key == definitionIfHeader {
			if len(h.Value) == 0 {
				return !ok
			}
			sum := sha256.Sum256(live)
			return ok && bytes.Equal(h.Value, sum[:])
		}
	}
	return true
}

// write writes a definition (value nil: its tombstone) and returns once
// this node applied it: in a cluster the apply loop did; on a single node
// it is applied here, under mu, so in the order of the writes.
func (s *DefinitionStore) write(key string, value []byte, headers ...record.RecordHeader) error {
	r := record.Record{Key: []byte(definitionPrefix + key), Value: value, Headers: headers}
	if err := s.meta.writeBatch([]record.Record{r}); err != nil {
		return err
	}
	if s.meta.raft == nil {
		s.liveMu.Lock()
		live, ok := s.live[key]
		s.liveMu.Unlock()
		if definitionApplies(headers, live, ok) {
			s.applied(key, value)
		}
	}
	return nil
}

// set makes value key's live value (nil: deleted).
func (s *DefinitionStore) set(key string, value []byte) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if value == nil {
		delete(s.live, key)
	} else {
		s.live[key] = slices.Clone(value)
	}
}

// Delete removes key durably. A key this node holds no value for gets
// no tombstone; in a cluster, only once a barrier shows that no node
// wrote one this node has not applied yet, or a key created on another
// node just before would survive its deletion.
func (s *DefinitionStore) Delete(key string) error {
	if _, ok := s.Get(key); !ok {
		if err := s.Barrier(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.Get(key); !ok {
		return nil
	}
	return s.write(key, nil)
}

// Load calls fn for every stored key, in key order.
func (s *DefinitionStore) Load(fn func(key string, value []byte) error) error {
	s.liveMu.Lock()
	snapshot := maps.Clone(s.live)
	s.liveMu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(snapshot)) {
		if err := fn(k, snapshot[k]); err != nil {
			return err
		}
	}
	return nil
}
