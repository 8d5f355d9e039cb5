package broker

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
)

// What the other cores need of the definition store in a cluster (issues
// 13, 14 and 15): every node applies the definitions the metadata group
// commits, and each core that keeps its definitions in memory (the AMQP
// registry, users, ACLs, client quotas, permissions) follows them as
// they are applied, whichever node wrote them, in log order: on the node
// that wrote one before its Put or Delete returns, on the others as they
// apply it. On a single node the writes are the only changes, and a
// follower hears of each as it is made.

// barrierKey is the definition a Barrier writes: always a tombstone, so it
// leaves nothing behind.
const barrierKey = "cluster/barrier"

// follower hears of the changed keys under its prefix (value nil: deleted).
type follower func(key string, value []byte) error

// Follow calls fn with every live key under prefix and its value, in key
// order, and from then on with every change of a key under prefix as this
// node applies it, in log order, once Get returns the new value (value
// nil: the key was deleted). A replayed key fn fails stops Follow with
// fn's error, fn left unregistered; an applied one that fails is logged,
// as the log goes on regardless. fn runs on the apply loop (on a single
// node, in the writer's Put or Delete): it must not block, nor write to
// the store, and must not keep value. One follower per prefix: a second
// replaces the first.
func (s *DefinitionStore) Follow(prefix string, fn func(key string, value []byte) error) error {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	s.liveMu.Lock()
	replay := maps.Clone(s.live)
	s.liveMu.Unlock()
	for _, key := range slices.Sorted(maps.Keys(replay)) {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		if err := fn(key, replay[key]); err != nil {
			return err
		}
	}
	s.follow(prefix, fn)
	return nil
}

// Watch makes fn hear of the key of every change under prefix, as Follow
// does, without the replay (the AMQP registry loads by itself, and asks
// for the values with Get); nil fn stops it.
func (s *DefinitionStore) Watch(prefix string, fn func(key string)) {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	if fn == nil {
		delete(s.followers, prefix)
		return
	}
	s.follow(prefix, func(key string, _ []byte) error {
		fn(key)
		return nil
	})
}

// follow registers fn for prefix; followMu is held.
func (s *DefinitionStore) follow(prefix string, fn follower) {
	if s.followers == nil {
		s.followers = map[string]follower{}
	}
	s.followers[prefix] = fn
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
// any node. Callers that come while a barrier is written share the next
// one, so a burst of them costs two writes. A single node's definitions
// are always current.
func (s *DefinitionStore) Barrier() error { return s.BarrierContext(context.Background()) }

// BarrierContext is Barrier for a caller bound by a deadline of its own
// (an AMQP handshake's): it stops waiting when ctx ends, with ctx's
// cause, while the barrier goes on for the others waiting for it (a
// write ends by the metadata write timeout).
func (s *DefinitionStore) BarrierContext(ctx context.Context) error {
	if s.meta.raft == nil {
		return nil
	}
	return s.barriers.await(ctx, func() error { return s.meta.writeRaw(definitionPrefix+barrierKey, nil) })
}

// applied makes value key's live value as it is applied, and tells the
// followers of its prefix.
func (s *DefinitionStore) applied(key string, value []byte) {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	s.set(key, value)
	for prefix, fn := range s.followers {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		if err := fn(key, value); err != nil {
			s.logger.Error("applying a definition from the metadata log failed; this node goes on without it", "key", key, "err", err)
		}
	}
}

// barrierRounds runs barriers one at a time, each for every caller that
// came before it started. The rounds are written by a goroutine of their
// own, not by a caller, so that a caller whose wait ends first (its ctx)
// leaves the round to the others rather than failing it for them, and
// never waits for a round it did not join; on a node cut off from the
// metadata quorum a round lasts the metadata write timeout (30 s).
type barrierRounds struct {
	mu      sync.Mutex
	next    *barrierRound // the round callers join: it has not started
	writing bool          // the goroutine that writes rounds runs
}

type barrierRound struct {
	done chan struct{}
	err  error
}

// await joins the round that has not started yet and returns its
// outcome, or ctx's cause if ctx ends first. It starts the goroutine
// that writes the rounds with write unless it runs.
func (b *barrierRounds) await(ctx context.Context, write func() error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx) // a round for nobody would be a write for nothing
	}
	b.mu.Lock()
	if b.next == nil {
		b.next = &barrierRound{done: make(chan struct{})}
	}
	r := b.next
	if !b.writing {
		b.writing = true
		go b.writeRounds(write)
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// writeRounds writes the rounds callers join, one after another, and
// ends once none is left to write: its life is bounded by the callers'
// and by write's (the metadata write timeout; at once when the broker
// closes).
func (b *barrierRounds) writeRounds(write func() error) {
	for {
		b.mu.Lock()
		r := b.next
		b.next = nil // whoever comes now needs a round that starts after this one
		if r == nil {
			b.writing = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		r.err = write()
		close(r.done)
	}
}
