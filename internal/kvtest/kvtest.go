// Package kvtest is an in-memory stand-in for the metadata log's
// definition store (broker.DefinitionStore), for the tests of the stores
// kept in it (ACLs, client quotas, permissions, users).
package kvtest

import (
	"bytes"
	"maps"
	"sync"
)

// Mem is a durable-looking key-value store in memory: what is Put is
// there for the next Load, as after a restart.
type Mem struct {
	mu   sync.Mutex
	data map[string][]byte
}

// New returns an empty store.
func New() *Mem { return &Mem{data: map[string][]byte{}} }

func (m *Mem) Put(key string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data[key] = bytes.Clone(value)
	return nil
}

func (m *Mem) Delete(key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.data, key)
	return nil
}

// Load calls fn for every key, in no particular order.
func (m *Mem) Load(fn func(key string, value []byte) error) error {
	m.mu.Lock()
	snapshot := maps.Clone(m.data)
	m.mu.Unlock()
	for k, v := range snapshot {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}
