package replica

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Target is what a Syncer round commits: a Log, or a writer of one that
// writes what it holds back first (a durable queue's store writes the
// messages it buffered, one append per round). Sync returns once
// everything appended or held back before the call is committed.
type Target interface {
	Sync() error
}

// Syncer is a commit round over a set of logs, for writers that must not
// block until their data is committed (the queueing core's publisher
// confirms): writers append without waiting and register a waiter (one
// message, or all of a publisher's flush) naming the Targets its data went
// to; each round takes every waiter registered so far, syncs each Target
// they name once (in parallel when there are several), and completes them
// all. While a round's fsyncs run, new waiters gather for the next round,
// so the number of fsyncs follows the disk's pace rather than the message
// rate, and each Target writes what it held back once per round.
type Syncer struct {
	mu      sync.Mutex
	waiting []syncWaiter
	stopped bool
	wake    chan struct{} // capacity 1: "there are waiters"
	stop    chan struct{}
	done    chan struct{}

	rounds atomic.Uint64 // rounds that completed waiters (for measurements)
}

type syncWaiter struct {
	targets []Target
	done    func(error)
}

// maxParallelSyncs bounds the fsyncs one round runs at once.
const maxParallelSyncs = 8

// StartSyncer starts a Syncer's goroutine; Shutdown stops it.
func StartSyncer() *Syncer {
	s := &Syncer{
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go s.run()
	return s
}

// Await registers a waiter: done is called, from the syncer's goroutine,
// once every target is synced, with the first error. targets is copied.
func (s *Syncer) Await(targets []Target, done func(error)) {
	w := syncWaiter{targets: append([]Target(nil), targets...), done: done}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		// Shutting down: a closed Store reports whether its close made
		// everything durable, and a Target still open is synced here.
		done(errors.Join(syncTargets(w.targets)...))
		return
	}
	s.waiting = append(s.waiting, w)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Rounds is how many rounds have completed waiters: with the number of
// confirms, how well fsyncs were shared.
func (s *Syncer) Rounds() uint64 { return s.rounds.Load() }

func (s *Syncer) run() {
	defer close(s.done)
	for {
		select {
		case <-s.wake:
			s.round()
		case <-s.stop:
			s.round()
			return
		}
	}
}

// Shutdown completes the waiters registered so far and stops the
// goroutine; later waiters are completed by Await itself.
func (s *Syncer) Shutdown() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
}

// round completes every waiter.
func (s *Syncer) round() {
	s.mu.Lock()
	waiting := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	s.rounds.Add(1)
	var distinct []Target
	index := make(map[Target]int)
	for _, w := range waiting {
		for _, t := range w.targets {
			if _, ok := index[t]; !ok {
				index[t] = len(distinct)
				distinct = append(distinct, t)
			}
		}
	}
	errs := syncTargets(distinct)
	for _, w := range waiting {
		var err error
		for _, t := range w.targets {
			if e := errs[index[t]]; e != nil && err == nil {
				err = e
			}
		}
		w.done(err)
	}
}

// syncTargets syncs each target, up to maxParallelSyncs at a time, and
// returns their errors by index.
func syncTargets(targets []Target) []error {
	errs := make([]error, len(targets))
	if len(targets) == 1 {
		errs[0] = targets[0].Sync()
		return errs
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallelSyncs)
	for i, t := range targets {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = t.Sync()
			<-sem
		}()
	}
	wg.Wait()
	return errs
}
