package jetstream

import (
	"encoding/json"
	"slices"
)

// streamState is a stream's persisted state: what its log alone does not
// say. First is the head (everything below left the stream, though the
// log may still hold it); Deleted are the explicit deletions above it.
type streamState struct {
	First   uint64   `json:"first,omitempty"`
	Deleted []uint64 `json:"deleted,omitempty"`
}

// stateRecordLocked returns the stream's state record if it changed since
// the last one, and marks it written.
func (s *stream) stateRecordLocked() (stateRecord, bool) {
	if !s.stateDirty || s.deleted {
		return stateRecord{}, false
	}
	s.stateDirty = false
	b, _ := json.Marshal(streamState{First: s.first, Deleted: slices.Clone(s.explicit)})
	return stateRecord{key: streamStateKey(s.id), value: b}, true
}

// writeStreamState writes a stream's state now, for an operation whose
// answer promises it (a delete, a purge).
func (svc *Service) writeStreamState(s *stream) error {
	s.mu.Lock()
	ch := stateChange{s: s}
	if rec, ok := s.stateRecordLocked(); ok {
		ch.add(rec, func() { s.stateDirty = true })
	}
	s.mu.Unlock()
	if len(ch.recs) == 0 {
		return nil
	}
	return svc.writeState([]stateChange{ch})
}
