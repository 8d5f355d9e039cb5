package jetstream

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// housekeeping runs, every second, what no request triggers: the age
// limit, the duplicate window's expiry, records Kafka producers appended,
// moving each log's start up to its stream's head, and deleting consumers
// left inactive.
func (svc *Service) housekeeping() {
	defer svc.wg.Done()
	tick := time.NewTicker(housekeepingInterval)
	defer tick.Stop()
	lastCompaction := time.Now()
	for {
		select {
		case <-svc.stop:
			return
		case now := <-tick.C:
			for _, s := range svc.allStreams() {
				svc.tidy(s, now)
			}
			if now.Sub(lastCompaction) >= stateCompactionInterval {
				lastCompaction = now
				if _, err := svc.cfg.State.Compact(context.Background(), now); err != nil {
					svc.log.Error("jetstream: compact the state log", "err", err)
				}
			}
		}
	}
}

// stateCompactionInterval is how often the state log is compacted.
const stateCompactionInterval = 10 * time.Minute

func (svc *Service) allStreams() []*stream {
	svc.mu.RLock()
	defer svc.mu.RUnlock()
	return slices.Collect(maps.Values(svc.streams))
}

func (svc *Service) tidy(s *stream, now time.Time) {
	s.mu.Lock()
	if s.deleted {
		s.mu.Unlock()
		return
	}
	if err := s.catchUpLocked(now); err != nil {
		svc.log.Error("jetstream: index records appended by Kafka producers", "stream", s.name, "err", err)
	}
	s.expireLocked(now)
	s.dedupe.expire(now, s.cfg.Duplicates)
	s.trimLogLocked()
	var idle []*consumer
	for _, c := range s.consumers {
		if c.inactiveLocked(now) {
			idle = append(idle, c)
		}
	}
	s.mu.Unlock()
	for _, c := range idle {
		svc.log.Info("consumer deleted after inactivity", "stream", s.name, "consumer", c.name, "inactive_threshold", c.cfg.InactiveThreshold)
		if err := svc.DeleteConsumer(s.name, c.name); err != nil && err != ErrConsumerNotFound {
			svc.log.Error("jetstream: delete an inactive consumer", "stream", s.name, "consumer", c.name, "err", err)
		}
	}
}

// stateFlusher writes the state that changed (consumer positions and
// acknowledgements, explicit deletions) every StateFlushInterval, all in
// one batch and one fsync.
func (svc *Service) stateFlusher() {
	defer svc.wg.Done()
	tick := time.NewTicker(svc.cfg.StateFlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-svc.stop:
			return
		case <-tick.C:
			if err := svc.flushState(); err != nil {
				svc.log.Error("jetstream: write consumer state", "err", err)
			}
		}
	}
}

// flushState writes every changed state record.
func (svc *Service) flushState() error {
	var changes []stateChange
	for _, s := range svc.allStreams() {
		s.mu.Lock()
		ch := stateChange{s: s}
		if rec, ok := s.stateRecordLocked(); ok {
			ch.add(rec, func() { s.stateDirty = true })
		}
		for _, c := range s.consumers {
			if rec, ok := c.stateRecordLocked(); ok {
				ch.add(rec, func() { c.dirty = true })
			}
		}
		s.mu.Unlock()
		if len(ch.recs) > 0 {
			changes = append(changes, ch)
		}
	}
	return svc.writeState(changes)
}

// stateChange is the changed state records of one stream and its
// consumers, and how to mark them changed again if they are not written.
type stateChange struct {
	s     *stream
	recs  []stateRecord
	marks []func() // under s.mu
}

func (ch *stateChange) add(rec stateRecord, mark func()) {
	ch.recs = append(ch.recs, rec)
	ch.marks = append(ch.marks, mark)
}

func (ch *stateChange) markChanged() {
	ch.s.mu.Lock()
	defer ch.s.mu.Unlock()
	for _, mark := range ch.marks {
		mark()
	}
}

// writeState writes state records once the logs of their streams have
// committed everything appended before the records were taken: a record
// names sequences (a consumer's position and acknowledgements, explicit
// deletions), and a crash that took such a sequence back from the log
// would give it to the next message, which the record then skips,
// although its publisher had its acknowledgement. The records of a
// stream whose log fails to commit are kept for the next round; so are
// all of them if the state log fails.
func (svc *Service) writeState(changes []stateChange) error {
	synced := make([]error, len(changes))
	var wg sync.WaitGroup
	for i, ch := range changes {
		wg.Add(1)
		svc.syncer.Await([]replica.Target{ch.s.log}, func(err error) {
			synced[i] = err
			wg.Done()
		})
	}
	wg.Wait()
	var recs []stateRecord
	var kept []stateChange
	for i, ch := range changes {
		if synced[i] != nil {
			kept = append(kept, ch)
			continue
		}
		recs = append(recs, ch.recs...)
	}
	err := svc.state.write(recs)
	if err != nil {
		kept = changes
	}
	for _, ch := range kept {
		ch.markChanged()
	}
	return errors.Join(append(synced, err)...)
}
