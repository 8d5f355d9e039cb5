package broker

import "slices"

// What the other cores need of the definition store in a cluster (issue
// 14): every node applies the definitions the metadata group commits, and
// a core that keeps them in memory (mq) must hear of each one as it is
// applied, whichever node wrote it.

// barrierKey is the definition a Barrier writes: always a tombstone, so it
// leaves nothing behind.
const barrierKey = "cluster/barrier"

// Watch makes fn hear of every definition this node applies from the
// metadata log, in commit order, by its key, once its value is the live
// one (Get). fn runs on the apply loop: it must not block, nor call into
// the store. Only a cluster applies records from other nodes; on a
// single node fn is never called. One watcher; a second call replaces it.
func (s *DefinitionStore) Watch(fn func(key string)) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	s.watch = fn
}

// Get returns key's live value.
func (s *DefinitionStore) Get(key string) ([]byte, bool) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	v, ok := s.live[key]
	return slices.Clone(v), ok
}

// Barrier returns once this node has applied every definition the
// cluster committed before the call: it writes a record through the
// metadata group and waits for its own node to apply it, so a read of
// the live values after it sees every write that completed before it, on
// any node. A single node's definitions are always current.
func (s *DefinitionStore) Barrier() error {
	if s.meta.raft == nil {
		return nil
	}
	return s.meta.writeRaw(definitionPrefix+barrierKey, nil)
}

// applied makes value key's live value as the apply loop applies it, and
// tells the watcher.
func (s *DefinitionStore) applied(key string, value []byte) {
	s.set(key, value)
	s.liveMu.Lock()
	fn := s.watch
	s.liveMu.Unlock()
	if fn != nil {
		fn(key)
	}
}
