package jetstream

import (
	"maps"
	"slices"
	"time"
)

// ConsumerAction is CONSUMER.CREATE's action: create only, update only,
// or either (the empty action).
type ConsumerAction int

const (
	ActionCreateOrUpdate ConsumerAction = iota
	ActionCreate
	ActionUpdate
)

// CreateConsumer creates a consumer of a stream, or updates the existing
// one of that name within what nats-server allows. An ephemeral consumer
// without a name gets one.
func (svc *Service) CreateConsumer(stream string, req ConsumerConfig, action ConsumerAction) (*ConsumerInfo, *APIError) {
	svc.adminMu.Lock()
	defer svc.adminMu.Unlock()
	s, aerr := svc.stream(stream)
	if aerr != nil {
		return nil, aerr
	}
	cfg := cloneConsumerConfig(req)
	if cfg.PauseUntil != nil && !cfg.PauseUntil.After(time.Now()) {
		cfg.PauseUntil = nil // not paused (the nats CLI sends the zero time)
	}
	s.mu.Lock()
	scfg := s.cfg
	setConsumerDefaults(&cfg, &scfg)
	if aerr := checkConsumerConfig(&cfg, &scfg); aerr != nil {
		s.mu.Unlock()
		return nil, aerr
	}
	name := cfg.Durable
	if name != "" {
		cfg.Name = name // nats-server shows a durable's name as its name too
	} else {
		name = cfg.Name
	}
	existing := s.consumers[name]
	if existing == nil && action == ActionUpdate {
		s.mu.Unlock()
		return nil, ErrConsumerDoesNotExist
	}
	if existing == nil && name == "" {
		for name == "" || s.consumers[name] != nil {
			name = newID(8)
		}
		cfg.Name = name
	}
	if aerr := s.checkConsumerFitsLocked(name, &cfg, existing == nil); aerr != nil {
		s.mu.Unlock()
		return nil, aerr
	}
	s.mu.Unlock()
	if existing != nil {
		return svc.updateConsumer(s, existing, cfg, action)
	}

	c := newConsumer(s, cfg, newID(16), time.Now().UTC())
	if c.persistent() {
		def := consumerDef{Stream: stream, Config: cfg, Created: c.created, ID: c.id}
		if err := svc.putDefinition(consumerDefKey(stream, name), def); err != nil {
			return nil, ErrConsumerCreate("%v", err)
		}
	}
	out := svc.outboxOnceStarted()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return nil, ErrStreamNotFound
	}
	if err := c.startLocked(); err != nil {
		return nil, ErrConsumerCreate("%v", err)
	}
	s.consumers[name] = c
	if out != nil {
		c.launchLocked(out)
	}
	return c.infoLocked(), nil
}

// checkConsumerFitsLocked checks what a consumer must share with its
// stream's others: their number, and under work queue retention that no
// two take the same subject.
func (s *stream) checkConsumerFitsLocked(name string, cfg *ConsumerConfig, isNew bool) *APIError {
	if isNew && s.cfg.MaxConsumers > 0 && len(s.consumers) >= s.cfg.MaxConsumers {
		return ErrMaxConsumers
	}
	if s.cfg.Retention != WorkQueuePolicy {
		return nil
	}
	if isNew {
		if cfg.AckPolicy != AckExplicit {
			return ErrConsumerWQExplicitAck
		}
		if cfg.DeliverPolicy != DeliverAll {
			return ErrConsumerWQDeliverAll
		}
	}
	others := 0
	for other, o := range s.consumers {
		if other == name {
			continue
		}
		others++
		for _, f := range cfg.filter() {
			for _, g := range o.filter {
				if subjectsCollide(f, g) {
					return ErrConsumerWQNotUnique
				}
			}
		}
		if len(o.filter) == 0 {
			return ErrConsumerWQNotUnique
		}
	}
	if others > 0 && len(cfg.filter()) == 0 {
		return ErrConsumerWQMultiple
	}
	return nil
}

// updateConsumer answers a create of an existing consumer: with its info
// if the configuration is the same, else by updating it if the action
// allows and nats-server would.
func (svc *Service) updateConsumer(s *stream, c *consumer, cfg ConsumerConfig, action ConsumerAction) (*ConsumerInfo, *APIError) {
	s.mu.Lock()
	old := cloneConsumerConfig(c.cfg)
	s.mu.Unlock()
	cfg.Name = old.Name // a generated name is not in the config
	if sameConsumerConfig(&old, &cfg) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return c.infoLocked(), nil
	}
	if action == ActionCreate {
		return nil, ErrConsumerExists
	}
	if err := checkConsumerUpdate(&old, &cfg); err != nil {
		return nil, ErrConsumerCreate("%v", err)
	}
	if c.persistent() {
		def := consumerDef{Stream: s.name, Config: cfg, Created: c.created, ID: c.id}
		if err := svc.putDefinition(consumerDefKey(s.name, c.name), def); err != nil {
			return nil, ErrConsumerCreate("%v", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.cfg = cfg
	c.filter = cfg.filter()
	c.countPendingLocked()
	c.dirty = true
	c.signal()
	return c.infoLocked(), nil
}

// outboxOnceStarted is the Outbox new consumers deliver through, nil
// before Start (which starts the consumers there are then). Read before
// taking a stream's lock: the service's lock is never taken under one.
func (svc *Service) outboxOnceStarted() Outbox {
	svc.mu.RLock()
	defer svc.mu.RUnlock()
	if !svc.started {
		return nil
	}
	return svc.outbox
}

// DeleteConsumer deletes a consumer; its waiting pull requests get 409
// Consumer Deleted.
func (svc *Service) DeleteConsumer(stream, name string) *APIError {
	svc.adminMu.Lock()
	defer svc.adminMu.Unlock()
	s, aerr := svc.stream(stream)
	if aerr != nil {
		return aerr
	}
	s.mu.Lock()
	c := s.consumers[name]
	s.mu.Unlock()
	if c == nil {
		return ErrConsumerNotFound
	}
	if c.persistent() {
		if err := svc.cfg.Definitions.Delete(consumerDefKey(stream, name)); err != nil {
			return ErrStreamGeneral(err)
		}
	}
	s.mu.Lock()
	delete(s.consumers, name)
	if s.cfg.Retention == InterestPolicy {
		s.dropUninterestingLocked()
	}
	s.mu.Unlock()
	c.remove()
	if c.persistent() {
		if err := svc.state.write([]stateRecord{{key: consumerStateKey(c.id)}}); err != nil {
			svc.log.Warn("jetstream: state of a deleted consumer left in the state log", "stream", stream, "consumer", name, "err", err)
		}
	}
	return nil
}

// remove stops a deleted consumer and tells its waiting pull requests.
func (c *consumer) remove() {
	c.s.mu.Lock()
	c.removed = true
	waiting := c.waiting
	c.waiting = nil
	out := c.out
	c.s.mu.Unlock()
	c.halt()
	if out == nil {
		return
	}
	for _, r := range waiting {
		st := r.status("409", "Consumer Deleted")
		out.Send(st.to, &st.msg)
	}
}

// ConsumerInfo returns a consumer's info.
func (svc *Service) ConsumerInfo(stream, name string) (*ConsumerInfo, *APIError) {
	s, aerr := svc.stream(stream)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.consumers[name]
	if c == nil {
		return nil, ErrConsumerNotFound
	}
	return c.infoLocked(), nil
}

// Consumers returns the info of every consumer of a stream, sorted by
// name.
func (svc *Service) Consumers(stream string) ([]*ConsumerInfo, *APIError) {
	s, aerr := svc.stream(stream)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var infos []*ConsumerInfo
	for _, name := range slices.Sorted(maps.Keys(s.consumers)) {
		infos = append(infos, s.consumers[name].infoLocked())
	}
	return infos, nil
}
