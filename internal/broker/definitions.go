package broker

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
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

// write writes a definition (value nil: its tombstone) and returns once
// this node applied it: in a cluster the apply loop did; on a single node
// it is applied here, under mu, so in the order of the writes.
func (s *DefinitionStore) write(key string, value []byte) error {
	if err := s.meta.writeRaw(definitionPrefix+key, value); err != nil {
		return err
	}
	if s.meta.raft == nil {
		s.applied(key, value)
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

// Delete removes key durably.
func (s *DefinitionStore) Delete(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.liveMu.Lock()
	_, ok := s.live[key]
	s.liveMu.Unlock()
	if !ok {
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
