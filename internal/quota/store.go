package quota

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// KV is the durable key-value store quotas live in: the metadata log's
// definition store. Put and Delete return once the change is durable and
// applied on this node.
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

// keyPrefix marks the quota records among the node's other definitions.
const keyPrefix = "quota/"

// Manager holds the quotas and the rates measured against them. Its
// methods are safe for concurrent use. Its quotas are what this node
// applied of the metadata log, so a quota set on another node applies
// here as this node applies it (one replication round trip later); the
// rates are this node's own, as each Kafka broker measures its own.
type Manager struct {
	kv KV

	writeMu sync.Mutex   // serialises changes, each of which reads an entity's quotas and writes them back
	mu      sync.RWMutex // guards quotas, changed only as the KV applies them
	quotas  map[Entity]map[string]float64
	any     atomic.Bool // some quota is set: only then is anything measured
	sensors sensors
}

// record is an entity's quotas as stored.
type record struct {
	Entity map[string]*string `json:"entity"` // type -> name, null for <default>
	Values map[string]float64 `json:"values"`
}

func (e Entity) pairs() map[string]*string {
	out := map[string]*string{}
	for typ, p := range map[string]Part{TypeUser: e.User, TypeClientID: e.ClientID} {
		if p.Given {
			var name *string
			if !p.Default {
				name = &p.Name
			}
			out[typ] = name
		}
	}
	return out
}

// storeKey is the entity's key in the KV, unambiguous whatever the names
// hold.
func storeKey(e Entity) string {
	data, err := json.Marshal(e.pairs())
	if err != nil {
		panic(err) // strings only
	}
	return keyPrefix + string(data)
}

// Open loads every quota from kv and follows its changes.
func Open(kv KV) (*Manager, error) {
	m := &Manager{kv: kv, quotas: map[Entity]map[string]float64{}}
	m.sensors.init()
	if err := kv.Follow(keyPrefix, m.apply); err != nil {
		return nil, err
	}
	return m, nil
}

// apply makes a quota record the KV applied this node's quotas of its
// entity.
func (m *Manager) apply(key string, value []byte) error {
	var pairs map[string]*string
	if err := json.Unmarshal([]byte(strings.TrimPrefix(key, keyPrefix)), &pairs); err != nil {
		return fmt.Errorf("quota: record %q: %w", key, err)
	}
	var entityPairs []EntityPair
	for typ, name := range pairs {
		entityPairs = append(entityPairs, EntityPair{Type: typ, Name: name})
	}
	e, err := ParseEntity(entityPairs)
	if err != nil {
		return fmt.Errorf("quota: record %q: %w", key, err)
	}
	var r record
	if value != nil {
		if err := json.Unmarshal(value, &r); err != nil {
			return fmt.Errorf("quota: record %q: %w", key, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if value == nil {
		delete(m.quotas, e)
	} else {
		m.quotas[e] = r.Values
	}
	m.any.Store(len(m.quotas) > 0)
	return nil
}

// Alter sets and removes an entity's quotas (set values must pass
// CheckValue), durably unless validateOnly. Removing a key that is not
// set does nothing, as in Kafka. It first waits for the cluster, so the
// entity's other quotas, set on any node before, are kept.
func (m *Manager) Alter(e Entity, set map[string]float64, remove []string, validateOnly bool) error {
	for key, v := range set {
		if err := CheckValue(key, v); err != nil {
			return err
		}
	}
	for _, key := range remove {
		if !slices.Contains(Keys, key) {
			return invalidf("Invalid configuration key %s", key)
		}
	}
	if validateOnly {
		return nil
	}
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if err := m.kv.Barrier(); err != nil {
		return err
	}
	m.mu.RLock()
	values := maps.Clone(m.quotas[e])
	m.mu.RUnlock()
	if values == nil {
		values = map[string]float64{}
	}
	maps.Copy(values, set)
	for _, key := range remove {
		delete(values, key)
	}
	if len(values) == 0 {
		return m.kv.Delete(storeKey(e))
	}
	data, err := json.Marshal(record{Entity: e.pairs(), Values: values})
	if err != nil {
		return err
	}
	return m.kv.Put(storeKey(e), data)
}

// Described is one entity's quotas.
type Described struct {
	Entity Entity
	Values map[string]float64
}

// FilterPart selects entities by one type: Kafka's
// ClientQuotaFilterComponent.
type FilterPart struct {
	Type  string
	Match MatchType
	Name  string // for MatchExact
}

// MatchType is how a FilterPart matches, with Kafka's numbers.
type MatchType int8

const (
	MatchExact   MatchType = 0 // the entity has the type, with Name
	MatchDefault MatchType = 1 // the entity has the type, as <default>
	MatchAny     MatchType = 2 // the entity has the type, any name
)

// Describe returns the quotas of the entities the filter parts select,
// sorted; with strict, entities with types the filter does not name are
// left out, as Kafka's DescribeClientQuotas does.
func (m *Manager) Describe(parts []FilterPart, strict bool) ([]Described, error) {
	seen := map[string]bool{}
	for _, p := range parts {
		switch {
		case p.Type != TypeUser && p.Type != TypeClientID && p.Type != TypeIP:
			return nil, invalidf("Custom entity type '%s' not supported", p.Type)
		case seen[p.Type]:
			return nil, invalidf("Duplicate %s filter component entity type", p.Type)
		case p.Match < MatchExact || p.Match > MatchAny:
			return nil, invalidf("Unknown match type %d", p.Match)
		}
		seen[p.Type] = true
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Described
	for e, values := range m.quotas {
		if matches(e, parts, strict) {
			out = append(out, Described{Entity: e, Values: maps.Clone(values)})
		}
	}
	slices.SortFunc(out, func(a, b Described) int { return strings.Compare(storeKey(a.Entity), storeKey(b.Entity)) })
	return out, nil
}

func matches(e Entity, parts []FilterPart, strict bool) bool {
	named := map[string]bool{}
	for _, f := range parts {
		named[f.Type] = true
		var p Part
		switch f.Type {
		case TypeUser:
			p = e.User
		case TypeClientID:
			p = e.ClientID
		}
		switch {
		case !p.Given:
			return false
		case f.Match == MatchDefault && !p.Default:
			return false
		case f.Match == MatchExact && (p.Default || p.Name != f.Name):
			return false
		}
	}
	if strict {
		return (!e.User.Given || named[TypeUser]) && (!e.ClientID.Given || named[TypeClientID])
	}
	return true
}

// limit finds the quota of key for a client and the measuring it shares
// (Kafka's quota metric tags), in Kafka's order of precedence.
func (m *Manager) limit(key, user, clientID string) (bound float64, tags sensorKey, ok bool) {
	u, c, du, dc := Named(user), Named(clientID), DefaultPart, DefaultPart
	levels := []struct {
		e          Entity
		user, clnt bool // whether the user and the client id are in the tags
	}{
		{Entity{u, c}, true, true},
		{Entity{u, dc}, true, true},
		{Entity{User: u}, true, false},
		{Entity{du, c}, true, true},
		{Entity{du, dc}, true, true},
		{Entity{User: du}, true, false},
		{Entity{ClientID: c}, false, true},
		{Entity{ClientID: dc}, false, true},
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, l := range levels {
		v, found := m.quotas[l.e][key]
		if !found {
			continue
		}
		tags = sensorKey{key: key}
		if l.user {
			tags.user = user
		}
		if l.clnt {
			tags.clientID = clientID
		}
		return v, tags, true
	}
	return 0, sensorKey{}, false
}
