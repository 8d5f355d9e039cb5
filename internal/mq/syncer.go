package mq

import (
	"errors"
	"sync"
	"sync/atomic"
)

// syncer completes publisher confirms by group commit: publishers append
// without waiting and register a waiter (a commit: one message, or all of
// a Publisher's flush) naming the logs its messages went to; each round
// takes every waiter registered so far, fsyncs each log they name once (in
// parallel when there are several), and completes them all.
// While a round's fsyncs run, new waiters gather for the next round, so the
// number of fsyncs follows the disk's pace rather than the message rate.
type syncer struct {
	r *Registry

	mu      sync.Mutex
	waiting []syncWaiter
	stopped bool
	wake    chan struct{} // capacity 1: "there are waiters"
	stop    chan struct{}
	done    chan struct{}

	rounds atomic.Uint64 // rounds that completed confirms (for measurements)
}

type syncWaiter struct {
	stores []syncTarget
	c      *commit
}

// syncTarget is a log a publisher confirm waits for: a durable queue's
// messages log (*queueStore) or a stream queue's topic (*streamLog).
type syncTarget interface {
	sync() error
}

// maxParallelSyncs bounds the fsyncs one round runs at once.
const maxParallelSyncs = 8

func newSyncer(r *Registry) *syncer {
	return &syncer{
		r:    r,
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
}

// await registers commit c, to be finished once stores are fsynced.
// stores is copied.
func (s *syncer) await(c *commit, stores []syncTarget) {
	w := syncWaiter{stores: append([]syncTarget(nil), stores...), c: c}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		// Registry closing: the logs are closed with a final fsync, which
		// queueStore.sync reports as success; or they are still open and
		// this syncs them here.
		c.finish(errors.Join(syncStores(w.stores)...))
		return
	}
	s.waiting = append(s.waiting, w)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *syncer) run() {
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

// shutdown completes the waiters registered so far and stops the goroutine.
func (s *syncer) shutdown() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
}

// round completes every waiting confirm.
func (s *syncer) round() {
	s.mu.Lock()
	waiting := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	s.rounds.Add(1)
	var distinct []syncTarget
	index := make(map[syncTarget]int)
	for _, w := range waiting {
		for _, st := range w.stores {
			if _, ok := index[st]; !ok {
				index[st] = len(distinct)
				distinct = append(distinct, st)
			}
		}
	}
	errs := syncStores(distinct)
	for _, w := range waiting {
		var err error
		for _, st := range w.stores {
			if e := errs[index[st]]; e != nil && err == nil {
				err = e
			}
		}
		w.c.finish(err)
	}
}

// syncStores fsyncs each store's messages log, up to maxParallelSyncs at a
// time, and returns their errors by index.
func syncStores(stores []syncTarget) []error {
	errs := make([]error, len(stores))
	if len(stores) == 1 {
		errs[0] = stores[0].sync()
		return errs
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallelSyncs)
	for i, st := range stores {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = st.sync()
			<-sem
		}()
	}
	wg.Wait()
	return errs
}
