package mq

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// clusterDefs plays the cluster's replicated metadata log: a write on any
// node is applied on every node (its live value set, its watcher told)
// before it returns, in one order.
type clusterDefs struct {
	mu       sync.Mutex
	live     map[string][]byte
	watchers map[int32]func(key string)
	// delay, if set, is called before every write is applied: a test
	// holds a write back there, as a slow metadata log would.
	delay atomic.Pointer[func(key string, value []byte)]
	// after, if set, is called once a write was applied or ignored: a
	// test learns there that a write it held back is through.
	after atomic.Pointer[func(key string, value []byte)]
}

func newClusterDefs() *clusterDefs {
	return &clusterDefs{live: map[string][]byte{}, watchers: map[int32]func(string){}}
}

// nodeDefs is one node's view of the cluster's definitions.
type nodeDefs struct {
	c    *clusterDefs
	node int32
}

func (d nodeDefs) write(key string, value []byte) error {
	return d.writeIf(key, value, func([]byte, bool) bool { return true })
}

// writeIf writes value under key if applies, given the key's live value
// as the write is applied, holds; else it ignores the write, as the
// metadata log does a PutIf whose condition fails.
func (d nodeDefs) writeIf(key string, value []byte, applies func(live []byte, ok bool) bool) error {
	if delay := d.c.delay.Load(); delay != nil {
		(*delay)(key, value)
	}
	if after := d.c.after.Load(); after != nil {
		defer (*after)(key, value)
	}
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	if live, ok := d.c.live[key]; !applies(live, ok) {
		return nil
	}
	if value == nil {
		delete(d.c.live, key)
	} else {
		d.c.live[key] = slices.Clone(value)
	}
	for _, fn := range d.c.watchers {
		fn(key)
	}
	return nil
}

func (d nodeDefs) Put(key string, value []byte) error {
	return d.write(key, append([]byte{}, value...))
}
func (d nodeDefs) Delete(key string) error { return d.write(key, nil) }

func (d nodeDefs) Load(fn func(key string, value []byte) error) error {
	d.c.mu.Lock()
	snap := maps.Clone(d.c.live)
	d.c.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(snap)) {
		if err := fn(k, snap[k]); err != nil {
			return err
		}
	}
	return nil
}

func (d nodeDefs) cluster() *ClusterConfig {
	return &ClusterConfig{
		NodeID: d.node,
		Watch: func(fn func(string)) {
			d.c.mu.Lock()
			defer d.c.mu.Unlock()
			if fn == nil {
				delete(d.c.watchers, d.node)
			} else {
				d.c.watchers[d.node] = fn
			}
		},
		Get: func(key string) ([]byte, bool) {
			d.c.mu.Lock()
			defer d.c.mu.Unlock()
			v, ok := d.c.live[key]
			return slices.Clone(v), ok
		},
		PutIf: func(key string, value, prev []byte) error {
			return d.writeIf(key, slices.Clone(value), func(live []byte, ok bool) bool {
				if prev == nil {
					return !ok
				}
				return ok && bytes.Equal(live, prev)
			})
		},
		Barrier: func() error { return nil }, // every write is applied everywhere before it returns
	}
}

// newClusterEnvs opens one registry per node over shared definitions.
func newClusterEnvs(t *testing.T, nodes int) []*env {
	c := newClusterDefs()
	envs := make([]*env, nodes)
	for i := range envs {
		d := nodeDefs{c: c, node: int32(i + 1)}
		envs[i] = newEnv(t, func(cfg *Config) { cfg.Definitions, cfg.Cluster = d, d.cluster() })
	}
	return envs
}

// eventually waits for cond, which a node's follow goroutine makes true.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestClusterDefinitionsFollowed: what node 1 declares, binds, sets and
// deletes, node 2 applies; node 2 holds node 1's queue as a placeholder
// (404 home node for a consume, a refused message), also after a restart,
// and keeps no files for it.
func TestClusterDefinitionsFollowed(t *testing.T) {
	envs := newClusterEnvs(t, 2)
	one, two := envs[0], envs[1]

	one.declareExchange("orders", "direct", true, nil)
	one.declareQueue("billing", true)
	one.bind("billing", "orders", "new", nil)
	one.setPolicy("limit", "^billing$", "queues", 0, `{"max-length": 5}`)
	if _, err := one.r.AddVHost("other"); err != nil {
		t.Fatal(err)
	}

	// Lookups on node 2 find them at once.
	if _, err := two.v.DeclareQueue(QueueDef{Name: "billing", Durable: true}, true); err != nil {
		t.Fatalf("passive declare on node 2: %v", err)
	}
	if err := two.v.DeclareExchange(ExchangeDef{Name: "orders", Type: "direct", Durable: true}, true); err != nil {
		t.Fatalf("passive exchange declare on node 2: %v", err)
	}
	eventually(t, "binding on node 2", func() bool { return len(two.v.Bindings()) == 1 })
	eventually(t, "policy on node 2", func() bool { _, ok := two.v.Policy("limit"); return ok })
	eventually(t, "vhost on node 2", func() bool { _, err := two.r.VHost("other"); return err == nil })

	_, err := two.v.Consume("billing", ConsumeSpec{Consumer: newConsumer(1)})
	wantCode(t, err, amqpwire.CodeNotFound, "NOT_FOUND - home node 'wharf@1' of durable queue 'billing' in vhost '/' is down or inaccessible")
	if res := two.publish(persistent("orders", "new", "x")); res.Routed != 1 || res.Rejected != 1 {
		t.Fatalf("publish on node 2 to node 1's queue: %+v, want routed and refused", res)
	}
	if res := one.publish(persistent("orders", "new", "y")); res.Routed != 1 || res.Rejected != 0 {
		t.Fatalf("publish on node 1: %+v", res)
	}
	if got := one.drain("billing"); !slices.Equal(got, []string{"y"}) {
		t.Fatalf("node 1's queue holds %q", got)
	}

	two.restart()
	if _, err := two.v.DeclareQueue(QueueDef{Name: "billing", Durable: true}, true); err != nil {
		t.Fatalf("passive declare on node 2 after its restart: %v", err)
	}
	if q, _ := two.v.lookupQueue("billing"); q == nil || !q.elsewhere() {
		t.Fatal("node 2 opened node 1's queue as its own after a restart")
	}
	if n, _, err := StoredQueues(two.dir); err != nil || n != 0 {
		t.Fatalf("node 2 keeps %d queue directories (%v), want none", n, err)
	}

	if err := one.v.UnbindQueue("billing", "orders", "new", nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := one.v.DeletePolicy("limit"); err != nil {
		t.Fatal(err)
	}
	if err := one.r.DeleteVHost("other"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "unbind on node 2", func() bool { return len(two.v.Bindings()) == 0 })
	eventually(t, "policy cleared on node 2", func() bool { _, ok := two.v.Policy("limit"); return !ok })
	eventually(t, "vhost deleted on node 2", func() bool { _, err := two.r.VHost("other"); return err != nil })

	// Deleted on node 2, node 1 deletes its queue and its files.
	if _, err := two.v.DeleteQueue("billing", false, false, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "queue deleted on node 1", func() bool { return one.v.queue("billing") == nil })
	eventually(t, "node 1's queue files removed", func() bool { n, _, _ := StoredQueues(one.dir); return n == 0 })
	if err := one.v.DeleteExchange("orders", false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "exchange deleted on node 2", func() bool { return two.v.exchange("orders") == nil })
}

// TestClusterMissesShareBarriers: lookups that miss at once share the
// barriers (writes to the metadata log) they wait for.
func TestClusterMissesShareBarriers(t *testing.T) {
	var barriers atomic.Int32
	d := nodeDefs{c: newClusterDefs(), node: 1}
	e := newEnv(t, func(cfg *Config) {
		cfg.Definitions, cfg.Cluster = d, d.cluster()
		cfg.Cluster.Barrier = func() error {
			barriers.Add(1)
			time.Sleep(5 * time.Millisecond) // a Raft round's latency
			return nil
		}
	})
	eventually(t, "caught up at start", func() bool { return barriers.Load() == 1 })
	const misses = 20
	var wg sync.WaitGroup
	for i := range misses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ae *Error
			if _, err := e.v.DeclareQueue(QueueDef{Name: fmt.Sprint("missing-", i)}, true); !errors.As(err, &ae) || ae.Code != amqpwire.CodeNotFound {
				t.Errorf("passive declare of a missing queue: %v, want 404", err)
			}
		}()
	}
	wg.Wait()
	if n := barriers.Load() - 1; n < 1 || n > misses/2 {
		t.Fatalf("%d lookups that missed at once ran %d barriers", misses, n)
	}
}

// newLateFollowerEnv opens one node of a cluster whose follower hears of
// no write (the test follows keys itself, as a follower far behind
// would) and whose every read of a key's live value calls the function
// afterRead holds, if any, once, after the read.
func newLateFollowerEnv(t *testing.T) (e *env, afterRead *atomic.Pointer[func()]) {
	d := nodeDefs{c: newClusterDefs(), node: 1}
	cc := d.cluster()
	cc.Watch = func(func(string)) {}
	afterRead = new(atomic.Pointer[func()])
	get := cc.Get
	cc.Get = func(key string) ([]byte, bool) {
		value, live := get(key)
		if fn := afterRead.Swap(nil); fn != nil {
			(*fn)()
		}
		return value, live
	}
	return newEnv(t, func(cfg *Config) { cfg.Definitions, cfg.Cluster = d, cc }), afterRead
}

// TestFollowerReadsUnderDefMu: the follower reads a definition's live
// value with its vhost's defMu held, so a local delete of the definition
// cannot fall between its read and its apply, where the follower would
// build the deleted queue, exchange, binding or policy again from the
// value read before (the queue live, reopening the store the delete
// cleans up) until the delete is followed. Here the follower follows a
// declare's key late, and the delete comes right after it read the key
// if defMu lets it, else once the follower is done.
func TestFollowerReadsUnderDefMu(t *testing.T) {
	for _, c := range []struct {
		kind, prefix string
		declare      func(e *env)
		delete       func(e *env) error
		exists       func(e *env) bool
	}{
		{"queue", queueKeyPrefix,
			func(e *env) { e.declareQueue("billing", true) },
			func(e *env) error { _, err := e.v.DeleteQueue("billing", false, false, 1); return err },
			func(e *env) bool { return e.v.queue("billing") != nil }},
		{"exchange", exchangeKeyPrefix,
			func(e *env) { e.declareExchange("orders", "direct", true, nil) },
			func(e *env) error { return e.v.DeleteExchange("orders", false) },
			func(e *env) bool { return e.v.exchange("orders") != nil }},
		{"binding", bindingKeyPrefix,
			func(e *env) {
				e.declareExchange("orders", "direct", true, nil)
				e.declareQueue("billing", true)
				e.bind("billing", "orders", "new", nil)
			},
			func(e *env) error { return e.v.UnbindQueue("billing", "orders", "new", nil, 1) },
			func(e *env) bool { return len(e.v.Bindings()) != 0 }},
		{"policy", policyKeyPrefix,
			func(e *env) { e.setPolicy("limit", "^billing$", "queues", 0, `{"max-length": 5}`) },
			func(e *env) error { return e.v.DeletePolicy("limit") },
			func(e *env) bool { _, ok := e.v.Policy("limit"); return ok }},
	} {
		t.Run(c.kind, func(t *testing.T) {
			e, afterRead := newLateFollowerEnv(t)
			c.declare(e)
			keys := e.recordedKeys(c.prefix)
			if len(keys) != 1 {
				t.Fatalf("recorded %q, want one %s", keys, c.kind)
			}
			var deleted bool
			var err error
			deleteNow := func() {
				if !e.v.defMu.TryLock() {
					return // the follower holds it: the delete waits
				}
				e.v.defMu.Unlock()
				deleted, err = true, c.delete(e)
			}
			afterRead.Store(&deleteNow)
			e.r.followDefinition(keys[0])
			if !deleted {
				err = c.delete(e)
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.exists(e) {
				t.Fatalf("the deleted %s is back", c.kind)
			}
		})
	}
}

// TestFollowerReadsVHostUnderLock: the follower reads a vhost's live
// value with vhostDefMu held, as it reads other definitions under their
// vhost's defMu, so a local add or delete of the vhost cannot fall
// between its read and its apply. Read before, a late follow of the
// vhost's deletion would destroy the vhost added again just now,
// deleting its record for good, and a late follow of its creation would
// add back the vhost deleted just now. The add or delete comes right
// after the follower's read if vhostDefMu lets it, else once the
// follower is done.
func TestFollowerReadsVHostUnderLock(t *testing.T) {
	for _, c := range []struct {
		name    string
		before  func(e *env) error // leaves the key the follower follows late
		change  func(e *env) error // the local change that must stand
		present bool               // the vhost after the change
	}{
		{"add after a delete",
			func(e *env) error {
				if _, err := e.r.AddVHost("shop"); err != nil {
					return err
				}
				return e.r.DeleteVHost("shop")
			},
			func(e *env) error { _, err := e.r.AddVHost("shop"); return err },
			true},
		{"delete after an add",
			func(e *env) error { _, err := e.r.AddVHost("shop"); return err },
			func(e *env) error { return e.r.DeleteVHost("shop") },
			false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, afterRead := newLateFollowerEnv(t)
			if err := c.before(e); err != nil {
				t.Fatal(err)
			}
			var changed bool
			var err error
			changeNow := func() {
				if !e.r.vhostDefMu.TryLock() {
					return // the follower holds it: the change waits
				}
				e.r.vhostDefMu.Unlock()
				changed, err = true, c.change(e)
			}
			afterRead.Store(&changeNow)
			e.r.followDefinition(vhostKey("shop"))
			if !changed {
				err = c.change(e)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.r.VHost("shop")
			if present := err == nil; present != c.present {
				t.Fatalf("vhost present %v after the follower, want %v", present, c.present)
			}
			if recorded := len(e.recordedKeys(vhostKey("shop"))) == 1; recorded != c.present {
				t.Fatalf("vhost recorded %v after the follower, want %v", recorded, c.present)
			}
		})
	}
}
