package mq

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lagBehind makes a node's replica of the metadata log apply what the
// cluster commits only when the node runs a barrier, as a node that lags
// does: its follower hears of another node's write at its next barrier,
// not before. It returns the count of barriers the node ran.
func lagBehind(cc *ClusterConfig) *atomic.Int64 {
	var (
		mu     sync.Mutex
		held   []string
		follow func(string)
	)
	cc.Watch(func(key string) { // every write, wherever made, is held
		mu.Lock()
		held = append(held, key)
		mu.Unlock()
	})
	cc.Watch = func(fn func(string)) {
		mu.Lock()
		follow = fn
		mu.Unlock()
	}
	barriers := new(atomic.Int64)
	cc.Barrier = func() error {
		barriers.Add(1)
		mu.Lock()
		keys, fn := held, follow
		held = nil
		mu.Unlock()
		for _, key := range keys {
			if fn != nil {
				fn(key)
			}
		}
		return nil
	}
	return barriers
}

// newLaggingPair opens two nodes over shared definitions: node 1, and
// node 2 that lags (lagBehind) and runs on clk (its timers run when the
// test ticks); it returns node 2's barrier count.
func newLaggingPair(t *testing.T, clk *fakeClock) (home, lagging *env, barriers *atomic.Int64) {
	envs, _ := newClassicEnvsTweaked(t, 2, func(node int32, cfg *Config) {
		if node == 2 {
			barriers = lagBehind(cfg.Cluster)
			cfg.clock, cfg.manualTimers = clk.Now, true
		}
	})
	<-envs[1].r.follower.caughtUp // its barrier at start is behind it
	return envs[0], envs[1], barriers
}

// TestCatchUpFollowsEveryKey: CatchUp returns once this node followed
// every definition committed before it, not only applied them, so a
// lookup that cannot name the key it misses (a binding by its properties
// key) finds a binding another node made just now. Node 2's follower
// reads the binding's value only once the test looked at node 2's
// bindings (or 100 ms passed), so a CatchUp that returned before it
// followed the binding finds none.
func TestCatchUpFollowsEveryKey(t *testing.T) {
	looked := make(chan struct{})
	envs, _ := newClassicEnvsTweaked(t, 2, func(node int32, cfg *Config) {
		if node == 2 {
			lagBehind(cfg.Cluster)
			get := cfg.Cluster.Get
			cfg.Cluster.Get = func(key string) ([]byte, bool) {
				if strings.HasPrefix(key, bindingKeyPrefix) {
					select {
					case <-looked:
					case <-time.After(100 * time.Millisecond):
					}
				}
				return get(key)
			}
		}
	})
	home, lagging := envs[0], envs[1]
	<-lagging.r.follower.caughtUp // its barrier at start is behind it
	home.declareExchange("orders", "direct", true, nil)
	home.declareQueue("billing", true)
	home.bind("billing", "orders", "new", nil)
	caughtUp := lagging.r.CatchUp()
	got := lagging.v.Bindings()
	close(looked)
	if !caughtUp {
		t.Fatal("CatchUp reports nothing to catch up with in a cluster")
	}
	if len(got) != 1 || got[0].Source != "orders" || got[0].Destination != "billing" {
		t.Fatalf("node 2's bindings after CatchUp: %+v", got)
	}
}

// TestPublishThroughBindingMadeElsewhereJustNow: a publish through a
// named exchange that reaches no queue on a node that has not applied a
// binding made on another node catches up first, and reaches the
// binding's queue; through an exchange that caught up less than
// unroutableCatchUpMs ago it does not wait for another barrier (a fanout
// nobody is bound to pays one a second, not one a message).
func TestPublishThroughBindingMadeElsewhereJustNow(t *testing.T) {
	clk := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	home, lagging, barriers := newLaggingPair(t, clk)
	home.declareExchange("orders", "direct", true, nil)
	home.declareQueue("billing", true)
	lagging.r.CatchUp() // node 2 has the exchange and the queue, not what comes next
	home.bind("billing", "orders", "new", nil)

	res := lagging.publish(persistent("orders", "new", "first"))
	if res.Routed != 1 {
		t.Fatalf("routed to %d queues, want node 1's queue through the binding node 1 made", res.Routed)
	}
	waitDurable(t, res)
	if got := home.drain("billing"); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("node 1's queue holds %q", got)
	}

	before := barriers.Load()
	if res := lagging.publish(msg("orders", "nobody", "m")); res.Routed != 0 {
		t.Fatalf("routed to %d queues, want none", res.Routed)
	}
	if n := barriers.Load() - before; n != 0 {
		t.Fatalf("an unroutable publish less than %d ms after the exchange caught up ran %d barriers", unroutableCatchUpMs, n)
	}
	lagging.tick(clk, unroutableCatchUpMs*time.Millisecond)
	lagging.publish(msg("orders", "nobody", "m"))
	if n := barriers.Load() - before; n != 1 {
		t.Fatalf("an unroutable publish %d ms after the exchange caught up ran %d barriers, want 1", unroutableCatchUpMs, n)
	}
}

// TestBindingOfAnotherNodeDeletedThere: a binding only node 1 has (to
// its transient queue) is listed by node 2 with its node, and deleted by
// node 2 on node 1 (UnbindOn), which reports whether it had it.
func TestBindingOfAnotherNodeDeletedThere(t *testing.T) {
	envs, _ := newClassicEnvs(t, 2)
	one, two := envs[0], envs[1]
	one.declareQueue("scratch", false)
	one.bind("scratch", "amq.topic", "k.#", nil)
	var found *NodeBinding
	others, unanswered := two.r.BindingsElsewhere(context.Background(), "/")
	for i, o := range others {
		if o.Source == "amq.topic" && o.Destination == "scratch" && o.Key == "k.#" {
			found = &others[i]
		}
	}
	if found == nil || found.Node != 1 || len(unanswered) != 0 {
		t.Fatalf("node 2 sees node 1's bindings %+v (unanswered %v)", others, unanswered)
	}
	for _, want := range []bool{true, false} {
		had, err := two.r.UnbindOn(context.Background(), found.Node, "/", found.BindingInfo)
		if err != nil || had != want {
			t.Fatalf("UnbindOn: had %v, %v; want %v", had, err, want)
		}
	}
	if got := one.v.Bindings(); len(got) != 0 {
		t.Fatalf("node 1 keeps %+v", got)
	}
}

// TestUnroutableCatchUpBounded: on a node whose barriers do not return
// (cut off from the metadata group's quorum), a publish through an
// exchange that reaches no queue gives its catch-up up after
// unroutableCatchUpWait and is unroutable, and the next one in the same
// second does not try: the channel is not stalled for barrierWait.
func TestUnroutableCatchUpBounded(t *testing.T) {
	clk := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	var cutOff atomic.Bool
	rejoined := make(chan struct{})
	envs, _ := newClassicEnvsTweaked(t, 1, func(_ int32, cfg *Config) {
		barrier := cfg.Cluster.Barrier
		cfg.Cluster.Barrier = func() error {
			if cutOff.Load() {
				<-rejoined
			}
			return barrier()
		}
		cfg.clock, cfg.manualTimers = clk.Now, true
	})
	e := envs[0]
	<-e.r.follower.caughtUp // the barrier at start went through
	cutOff.Store(true)
	t.Cleanup(func() { close(rejoined) }) // before the registry closes
	e.declareExchange("orders", "fanout", true, nil)
	for range 2 {
		start := time.Now()
		if res := e.publish(msg("orders", "", "m")); res.Routed != 0 {
			t.Fatalf("routed to %d queues, want none", res.Routed)
		}
		if took := time.Since(start); took > barrierWait/3 {
			t.Fatalf("an unroutable publish waited %v for a barrier that does not return", took)
		}
	}
}
