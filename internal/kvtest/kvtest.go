// Package kvtest is an in-memory stand-in for the metadata log's
// definition store (broker.DefinitionStore), for the tests of the stores
// kept in it (ACLs, client quotas, permissions, users) and of the AMQP
// registry (mq), which a Node serves as a cluster node's store.
package kvtest

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Mem is a durable-looking key-value store in memory: what is Put is
// there for the next Load, as after a restart. Used as it is, it is a
// single node's store: its followers hear of every change as it is made.
// Its Nodes are the views of the nodes of a cluster over one metadata
// log, each of which may lag the others.
type Mem struct {
	mu        sync.Mutex // serialises changes, so followers hear of them in order
	data      map[string][]byte
	followers []*follower
}

// follower is a Follow call's fn, with the changes it has yet to hear of.
type follower struct {
	prefix  string
	fn      func(key string, value []byte) error
	lags    bool // changes wait in pending until its node catches up
	watch   bool // a Watch's, which hears of keys only
	pending []change
}

type change struct {
	key   string
	value []byte // nil: deleted
}

// New returns an empty store.
func New() *Mem { return &Mem{data: map[string][]byte{}} }

func (m *Mem) Put(key string, value []byte) error {
	if value == nil {
		value = []byte{} // nil is a deletion's, as in the definition store
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data[key] = bytes.Clone(value)
	m.changedLocked(key, m.data[key])
	return nil
}

func (m *Mem) Delete(key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.data, key)
	m.changedLocked(key, nil)
	return nil
}

// Load calls fn for every key, in key order.
func (m *Mem) Load(fn func(key string, value []byte) error) error {
	m.mu.Lock()
	snapshot := maps.Clone(m.data)
	m.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(snapshot)) {
		if err := fn(k, snapshot[k]); err != nil {
			return err
		}
	}
	return nil
}

// Follow calls fn with every key under prefix, in key order, then with
// every change under prefix as it is made (value nil: deleted), as
// broker.DefinitionStore.Follow does. A failing replay stops it.
func (m *Mem) Follow(prefix string, fn func(key string, value []byte) error) error {
	return m.follow(&follower{prefix: prefix, fn: fn})
}

// Barrier does nothing: a single node's store is always current.
func (m *Mem) Barrier() error { return nil }

// BarrierContext is Barrier, as broker.DefinitionStore.BarrierContext is
// for a caller bound by ctx.
func (m *Mem) BarrierContext(context.Context) error { return nil }

func (m *Mem) follow(f *follower) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(m.data)) {
		if !strings.HasPrefix(k, f.prefix) {
			continue
		}
		if err := f.fn(k, m.data[k]); err != nil {
			return err
		}
	}
	m.followers = append(m.followers, f)
	return nil
}

func (m *Mem) changedLocked(key string, value []byte) {
	for _, f := range m.followers {
		switch {
		case !strings.HasPrefix(key, f.prefix):
		case f.lags:
			f.pending = append(f.pending, change{key, value})
		default:
			f.fn(key, value)
		}
	}
}

// Node is one node's view of a cluster whose metadata log is m: the
// changes other nodes make reach its followers only when it catches up,
// that is when it writes (a node applies the log up to its own write
// before the write returns), calls Barrier or CatchUp.
type Node struct {
	m         *Mem
	followers []*follower
}

// Node returns a new node's view of m.
func (m *Mem) Node() *Node { return &Node{m: m} }

// Put writes through m and catches up.
func (n *Node) Put(key string, value []byte) error {
	n.m.Put(key, value)
	n.CatchUp()
	return nil
}

// Delete deletes through m and catches up.
func (n *Node) Delete(key string) error {
	n.m.Delete(key)
	n.CatchUp()
	return nil
}

// Follow is Mem.Follow; the changes after the replay wait for CatchUp.
func (n *Node) Follow(prefix string, fn func(key string, value []byte) error) error {
	f := &follower{prefix: prefix, fn: fn, lags: true}
	if err := n.m.follow(f); err != nil {
		return err
	}
	n.m.mu.Lock()
	n.followers = append(n.followers, f)
	n.m.mu.Unlock()
	return nil
}

// Load is Mem.Load: a node that opens loads what the log holds.
func (n *Node) Load(fn func(key string, value []byte) error) error { return n.m.Load(fn) }

// Get returns key's live value, as broker.DefinitionStore.Get does: the
// log's, whether or not the node applied it yet.
func (n *Node) Get(key string) ([]byte, bool) {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	v, ok := n.m.data[key]
	return bytes.Clone(v), ok
}

// PutIf writes value under key if key's live value is prev (prev nil:
// key has none), else leaves it, and catches up, as
// broker.DefinitionStore.PutIf does.
func (n *Node) PutIf(key string, value, prev []byte) error {
	if value == nil {
		value = []byte{}
	}
	n.m.mu.Lock()
	if live, ok := n.m.data[key]; prev == nil && !ok || prev != nil && ok && bytes.Equal(live, prev) {
		n.m.data[key] = bytes.Clone(value)
		n.m.changedLocked(key, n.m.data[key])
	}
	n.m.mu.Unlock()
	n.CatchUp()
	return nil
}

// Watch makes fn hear of the key of every change under prefix once the
// node applies it, without a replay, as broker.DefinitionStore.Watch
// does for the AMQP registry; nil fn stops every watch of the node.
func (n *Node) Watch(prefix string, fn func(key string)) {
	if fn == nil {
		n.m.mu.Lock()
		defer n.m.mu.Unlock()
		n.m.followers = slices.DeleteFunc(n.m.followers, func(f *follower) bool { return f.watch && slices.Contains(n.followers, f) })
		n.followers = slices.DeleteFunc(n.followers, func(f *follower) bool { return f.watch })
		return
	}
	f := &follower{prefix: prefix, lags: true, watch: true, fn: func(key string, _ []byte) error {
		fn(key)
		return nil
	}}
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	n.m.followers = append(n.m.followers, f)
	n.followers = append(n.followers, f)
}

// Barrier catches up, as a barrier through the metadata group does.
func (n *Node) Barrier() error {
	n.CatchUp()
	return nil
}

// BarrierContext is Barrier, which never waits here, as
// broker.DefinitionStore.BarrierContext is for a caller bound by ctx.
func (n *Node) BarrierContext(context.Context) error { return n.Barrier() }

// Lags reports whether the node has changes yet to apply.
func (n *Node) Lags() bool {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	for _, f := range n.followers {
		if len(f.pending) > 0 {
			return true
		}
	}
	return false
}

// CatchUp tells the node's followers of every change made so far, in
// order.
func (n *Node) CatchUp() {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	for _, f := range n.followers {
		for _, c := range f.pending {
			f.fn(c.key, c.value)
		}
		f.pending = nil
	}
}
