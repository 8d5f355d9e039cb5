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
// durable.
type KV interface {
	Put(key string, value []byte) error
	Delete(key string) error
	Load(fn func(key string, value []byte) error) error
}

// keyPrefix marks the ACL records among the node's other definitions.
const keyPrefix = "acl/"

// Store keeps the bindings. Changes are serialised and durable before
// they return; reads see an immutable index, so authorizing a request
// takes no lock.
type Store struct {
	kv KV

	mu       sync.Mutex // serialises changes
	bindings map[string]Binding
	index    atomic.Pointer[index]
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

// Open loads every binding from kv.
func Open(kv KV) (*Store, error) {
	s := &Store{kv: kv, bindings: map[string]Binding{}}
	err := kv.Load(func(k string, value []byte) error {
		if !strings.HasPrefix(k, keyPrefix) {
			return nil
		}
		var r record
		if err := json.Unmarshal(value, &r); err != nil {
			return fmt.Errorf("acl: record %q: %w", k, err)
		}
		b, err := r.binding()
		if err != nil {
			return fmt.Errorf("acl: record %q: %w", k, err)
		}
		s.bindings[k] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.reindex()
	return s, nil
}

// Create adds bindings that pass Validate; one that exists already is
// left as it is, as Kafka does. It returns one error (or nil) per binding.
func (s *Store) Create(bindings []Binding) []error {
	errs := make([]error, len(bindings))
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.reindex()
	for i, b := range bindings {
		if errs[i] = b.Validate(); errs[i] != nil {
			continue
		}
		k, data := key(b)
		if _, ok := s.bindings[k]; ok {
			continue
		}
		if errs[i] = s.kv.Put(k, data); errs[i] == nil {
			s.bindings[k] = b
		}
	}
	return errs
}

// Delete removes the bindings each filter matches and returns them, per
// filter; a binding two filters match is reported by the first. A filter
// that fails Validate deletes nothing.
func (s *Store) Delete(filters []Filter) ([][]Binding, []error) {
	deleted := make([][]Binding, len(filters))
	errs := make([]error, len(filters))
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.reindex()
	for i, f := range filters {
		if errs[i] = f.Validate(); errs[i] != nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(s.bindings)) {
			b := s.bindings[k]
			if !f.Matches(b) {
				continue
			}
			if errs[i] = s.kv.Delete(k); errs[i] != nil {
				break
			}
			delete(s.bindings, k)
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

// reindex publishes the bindings for authorization; s.mu is held.
func (s *Store) reindex() {
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
