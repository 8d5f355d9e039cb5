package replica

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// countingTarget counts its syncs; the first one waits for release.
type countingTarget struct {
	syncs   atomic.Int32
	hold    chan struct{} // nil: never waits
	started chan struct{}
	err     error
}

func (c *countingTarget) Sync() error {
	if c.syncs.Add(1) == 1 && c.hold != nil {
		close(c.started)
		<-c.hold
	}
	return c.err
}

// Waiters that gather while a round runs share the next one, which syncs
// each target they name once; each waiter gets the first error of its own
// targets.
func TestSyncerRoundSyncsEachTargetOnce(t *testing.T) {
	s := StartSyncer()
	defer s.Shutdown()
	slow := &countingTarget{hold: make(chan struct{}), started: make(chan struct{})}
	a, b := &countingTarget{}, &countingTarget{err: errors.New("b failed")}

	first := make(chan error, 1)
	s.Await([]Target{slow}, func(err error) { first <- err })
	<-slow.started // the first round is under way: the rest gather

	var wg sync.WaitGroup
	results := make([]error, 3)
	for i, targets := range [][]Target{{a}, {a, b}, {slow, a}} {
		wg.Add(1)
		s.Await(targets, func(err error) { results[i] = err; wg.Done() })
	}
	close(slow.hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if results[0] != nil || results[1] == nil || results[2] != nil {
		t.Errorf("waiters got %v; want nil, b's error, nil", results)
	}
	if a.syncs.Load() != 1 || b.syncs.Load() != 1 || slow.syncs.Load() != 2 {
		t.Errorf("syncs: a %d, b %d, slow %d; want 1, 1 and 2 (one per round)", a.syncs.Load(), b.syncs.Load(), slow.syncs.Load())
	}
	if s.Rounds() != 2 {
		t.Errorf("%d rounds, want 2", s.Rounds())
	}
}
