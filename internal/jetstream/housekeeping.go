package jetstream

import (
	"context"
	"maps"
	"slices"
	"time"
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

// flushState writes every changed state record; on failure they are
// marked changed again, for the next round.
func (svc *Service) flushState() error {
	var recs []stateRecord
	type undo struct {
		s    *stream
		mark func() // marks the record changed again, under s.mu
	}
	var written []undo
	for _, s := range svc.allStreams() {
		s.mu.Lock()
		if rec, ok := s.stateRecordLocked(); ok {
			recs = append(recs, rec)
			written = append(written, undo{s, func() { s.stateDirty = true }})
		}
		for _, c := range s.consumers {
			if rec, ok := c.stateRecordLocked(); ok {
				recs = append(recs, rec)
				written = append(written, undo{s, func() { c.dirty = true }})
			}
		}
		s.mu.Unlock()
	}
	err := svc.state.write(recs)
	if err != nil {
		for _, u := range written {
			u.s.mu.Lock()
			u.mark()
			u.s.mu.Unlock()
		}
	}
	return err
}
