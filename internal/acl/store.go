package acl

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KV is the durable key-value store the bindings live in: the metadata
// log's definition store. Put and Delete return once the change is
// durable and applied on this node.
type KV interface {
	Put(key string, value []byte) error
	Delete(key string) error
	// Follow calls fn with every key under prefix, then with every
	// change of one as this node applies it, in log order (value nil:
	// deleted), whichever node made it; on the node that made it before
	// Put or Delete returns.
	Follow(prefix string, fn func(key string, value []byte) error) error
	// Barrier returns once this node applied every change made before
	// the call on any node of the cluster.
	Barrier() error
}

// keyPrefix marks the ACL records among the node's other definitions.
const keyPrefix = "acl/"

// Store keeps the bindings: what this node applied of the metadata log,
// so a binding made on another node applies here as this node applies
// it (one replication round trip later, as a Kafka broker applies the
// controller's ACL records). Changes are serialised and durable before
// they return; reads see an immutable index, so authorizing a request
// takes no lock.
type Store struct {
	kv KV

	writeMu  sync.Mutex // serialises changes
	mu       sync.Mutex // guards bindings, changed only as the KV applies them
	bindings map[string]Binding
	index    atomic.Pointer[index] // nil while Open loads
}

// record is a binding as stored, with its enums by name.
type record struct {
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func toRecord(b Binding) record {
	return record{b.ResourceType.String(), b.ResourceName, b.PatternType.String(), b.Principal, b.Host,
		b.Operation.String(), b.Permission.String()}
}

func (r record) binding() (Binding, error) {
	var b Binding
	var errs [4]error
	b.ResourceType, errs[0] = kmsg.ParseACLResourceType(r.ResourceType)
	b.PatternType, errs[1] = kmsg.ParseACLResourcePatternType(r.PatternType)
	b.Operation, errs[2] = kmsg.ParseACLOperation(r.Operation)
	b.Permission, errs[3] = kmsg.ParseACLPermissionType(r.Permission)
	for _, err := range errs {
		if err != nil {
			return b, err
		}
	}
	b.ResourceName, b.Principal, b.Host = r.ResourceName, r.Principal, r.Host
	return b, b.Validate()
}

// key is the binding's key in the KV: its record, whose JSON encoding
// is unambiguous whatever the names contain.
func key(b Binding) (string, []byte) {
	data, err := json.Marshal(toRecord(b))
	if err != nil {
		panic(err) // strings only
	}
	return keyPrefix + string(data), data
}

// Open loads every binding from kv and follows its changes.
func Open(kv KV) (*Store, error) {
	s := &Store{kv: kv, bindings: map[string]Binding{}}
	if err := kv.Follow(keyPrefix, s.apply); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reindexLocked() // once for everything loaded
	return s, nil
}

// apply makes a binding record the KV applied part of this node's
// bindings.
func (s *Store) apply(k string, value []byte) error {
	var b Binding
	if value != nil {
		var r record
		if err := json.Unmarshal(value, &r); err != nil {
			return fmt.Errorf("acl: record %q: %w", k, err)
		}
		var err error
		if b, err = r.binding(); err != nil {
			return fmt.Errorf("acl: record %q: %w", k, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if value == nil {
		delete(s.bindings, k)
	} else {
		s.bindings[k] = b
	}
	if s.index.Load() != nil {
		s.reindexLocked()
	}
	return nil
}

// has reports whether the binding stored under k exists.
func (s *Store) has(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.bindings[k]
	return ok
}

// Create adds bindings that pass Validate; one that exists already is
// left as it is, as Kafka does. It returns one error (or nil) per binding.
func (s *Store) Create(bindings []Binding) []error {
	errs := make([]error, len(bindings))
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	for i, b := range bindings {
		if errs[i] = b.Validate(); errs[i] != nil {
			continue
		}
		if k, data := key(b); !s.has(k) {
			errs[i] = s.kv.Put(k, data)
		}
	}
	return errs
}

// Delete removes the bindings each filter matches and returns them, per
// filter; a binding two filters match is reported by the first. A filter
// that fails Validate deletes nothing. It first waits for the cluster, so
// it finds the bindings any node made before.
func (s *Store) Delete(filters []Filter) ([][]Binding, []error) {
	deleted := make([][]Binding, len(filters))
	errs := make([]error, len(filters))
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.kv.Barrier(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return deleted, errs
	}
	for i, f := range filters {
		if errs[i] = f.Validate(); errs[i] != nil {
			continue
		}
		s.mu.Lock()
		current := maps.Clone(s.bindings) // what the filters before this one left
		s.mu.Unlock()
		for _, k := range slices.Sorted(maps.Keys(current)) {
			b := current[k]
			if !f.Matches(b) {
				continue
			}
			if errs[i] = s.kv.Delete(k); errs[i] != nil {
				break
			}
			deleted[i] = append(deleted[i], b)
		}
	}
	return deleted, errs
}

// Describe returns the bindings f matches, in a stable order.
func (s *Store) Describe(f Filter) ([]Binding, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var out []Binding
	for _, b := range s.index.Load().all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out, nil
}

// reindexLocked publishes the bindings for authorization; s.mu is held.
func (s *Store) reindexLocked() {
	keys := slices.Sorted(maps.Keys(s.bindings))
	bindings := make([]Binding, len(keys))
	for i, k := range keys {
		bindings[i] = s.bindings[k]
	}
	s.index.Store(newIndex(bindings))
}

// index finds the bindings that apply to a resource without scanning
// them all: literal ones by name, prefixed ones by type.
type index struct {
	all      []Binding
	literal  map[kmsg.ACLResourceType]map[string][]Binding // "*" included
	prefixed map[kmsg.ACLResourceType][]Binding
}

func newIndex(bindings []Binding) *index {
	ix := &index{all: bindings, literal: map[kmsg.ACLResourceType]map[string][]Binding{}, prefixed: map[kmsg.ACLResourceType][]Binding{}}
	for _, b := range bindings {
		if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
			ix.prefixed[b.ResourceType] = append(ix.prefixed[b.ResourceType], b)
			continue
		}
		if ix.literal[b.ResourceType] == nil {
			ix.literal[b.ResourceType] = map[string][]Binding{}
		}
		ix.literal[b.ResourceType][b.ResourceName] = append(ix.literal[b.ResourceType][b.ResourceName], b)
	}
	return ix
}

// applying calls fn for every binding whose pattern covers the resource.
func (ix *index) applying(rt kmsg.ACLResourceType, name string, fn func(Binding)) {
	byName := ix.literal[rt]
	for _, b := range byName[name] {
		fn(b)
	}
	if name != WildcardResource {
		for _, b := range byName[WildcardResource] {
			fn(b)
		}
	}
	for _, b := range ix.prefixed[rt] {
		if strings.HasPrefix(name, b.ResourceName) {
			fn(b)
		}
	}
}
