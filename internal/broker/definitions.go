package broker

import (
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
	meta *metadataLog

	mu   sync.Mutex
	live map[string][]byte
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
	if err := s.meta.writeRaw(definitionPrefix+key, value); err != nil {
		return err
	}
	s.live[key] = slices.Clone(value)
	return nil
}

// Delete removes key durably.
func (s *DefinitionStore) Delete(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.live[key]; !ok {
		return nil
	}
	if err := s.meta.writeRaw(definitionPrefix+key, nil); err != nil {
		return err
	}
	delete(s.live, key)
	return nil
}

// Load calls fn for every stored key, in key order.
func (s *DefinitionStore) Load(fn func(key string, value []byte) error) error {
	s.mu.Lock()
	snapshot := maps.Clone(s.live)
	s.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(snapshot)) {
		if err := fn(k, snapshot[k]); err != nil {
			return err
		}
	}
	return nil
}
