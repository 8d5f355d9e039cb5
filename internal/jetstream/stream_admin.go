package jetstream

import (
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// CreateStream creates a stream, or answers a create of an existing one
// with the same configuration with its info, as nats-server does.
func (svc *Service) CreateStream(req StreamConfig) (*StreamInfo, *APIError) {
	cfg, aerr := checkStreamConfig(req)
	if aerr != nil {
		return nil, aerr
	}
	if cfg.Sealed {
		return nil, ErrStreamInvalidConfig("stream configuration for create can not be sealed")
	}
	svc.adminMu.Lock()
	defer svc.adminMu.Unlock()
	s, aerr := svc.stream(cfg.Name)
	if aerr != nil && aerr != ErrStreamNotFound {
		return nil, aerr // offline
	}
	if s != nil {
		if !sameStreamConfig(s.config(), cfg) {
			return nil, ErrStreamNameExist
		}
		return s.info(infoOptions{}), nil
	}
	if svc.overlapsOtherStream(cfg) {
		return nil, ErrStreamSubjectOverlap
	}
	log, err := svc.cfg.Logs.CreateLog(cfg.Name)
	if err != nil {
		return nil, ErrStreamCreate(err)
	}
	def := streamDef{Config: cfg, Created: time.Now().UTC(), ID: newID(16)}
	if err := svc.putDefinition(streamDefKey(cfg.Name), def); err != nil {
		if derr := svc.cfg.Logs.DeleteLog(cfg.Name); derr != nil {
			svc.log.Error("jetstream: delete the log of a stream not created", "stream", cfg.Name, "err", derr)
		}
		return nil, ErrStreamCreate(err)
	}
	s = newStream(svc, def, log)
	if err := s.rebuild(streamState{}, time.Now()); err != nil {
		return nil, ErrStreamCreate(err)
	}
	svc.mu.Lock()
	svc.streams[s.name] = s
	observer := svc.observer
	svc.mu.Unlock()
	svc.log.Info("stream created", "stream", s.name, "subjects", cfg.Subjects, "topic", TopicName(s.name))
	if observer != nil {
		observer(s.name, &cfg)
	}
	return s.info(infoOptions{}), nil
}

// UpdateStream changes a stream's configuration within what nats-server
// allows; new limits apply at once.
func (svc *Service) UpdateStream(req StreamConfig) (*StreamInfo, *APIError) {
	cfg, aerr := checkStreamConfig(req)
	if aerr != nil {
		return nil, aerr
	}
	svc.adminMu.Lock()
	defer svc.adminMu.Unlock()
	s, aerr := svc.stream(cfg.Name)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := checkStreamUpdate(s.config(), &cfg); aerr != nil {
		return nil, aerr
	}
	if svc.overlapsOtherStream(cfg) {
		return nil, ErrStreamSubjectOverlap
	}
	def := streamDef{Config: cfg, Created: s.created, ID: s.id}
	if err := svc.putDefinition(streamDefKey(cfg.Name), def); err != nil {
		return nil, ErrStreamUpdate("%v", err)
	}
	s.mu.Lock()
	s.cfg = cfg
	s.applyNewLimitsLocked(time.Now())
	s.mu.Unlock()
	svc.mu.RLock()
	observer := svc.observer
	svc.mu.RUnlock()
	if observer != nil {
		observer(s.name, &cfg)
	}
	return s.info(infoOptions{}), nil
}

// applyNewLimitsLocked applies limits an update lowered.
func (s *stream) applyNewLimitsLocked(now time.Time) {
	if limit := s.cfg.MaxMsgsPer; limit > 0 {
		for _, subj := range s.subjects.sorted() {
			for e := s.subjects[subj]; e != nil && int64(len(e.seqs)) > limit; e = s.subjects[subj] {
				s.removeLocked(e.seqs[0], subj, false)
			}
		}
	}
	for s.cfg.MaxMsgs > 0 && s.msgs > uint64(s.cfg.MaxMsgs) || s.cfg.MaxBytes > 0 && s.bytes > uint64(s.cfg.MaxBytes) {
		if !s.removeOldestLocked() {
			break
		}
	}
	s.expireLocked(now)
}

// DeleteStream deletes a stream, its consumers and its log.
func (svc *Service) DeleteStream(name string) *APIError {
	svc.adminMu.Lock()
	defer svc.adminMu.Unlock()
	svc.mu.RLock()
	offline := svc.offline[name]
	svc.mu.RUnlock()
	if offline != nil {
		return svc.deleteOffline(offline)
	}
	s, aerr := svc.stream(name)
	if aerr != nil {
		return aerr
	}
	s.mu.Lock()
	consumers := slices.Collect(maps.Values(s.consumers))
	s.mu.Unlock()
	var defined, ids []string
	for _, c := range consumers {
		if c.persistent() {
			defined = append(defined, c.name)
		}
		ids = append(ids, c.id)
	}
	if aerr := svc.deleteDefinitions(name, defined); aerr != nil {
		return aerr
	}
	svc.mu.Lock()
	delete(svc.streams, name)
	observer := svc.observer
	svc.mu.Unlock()
	s.mu.Lock()
	s.deleted = true
	s.mu.Unlock()
	for _, c := range consumers {
		c.remove()
	}
	svc.dropStreamData(name, s.id, ids)
	svc.log.Info("stream deleted", "stream", name)
	if observer != nil {
		observer(name, nil)
	}
	return nil
}

// deleteOffline deletes a stream that could not be loaded: its
// definitions, its state and whatever is left of its log.
func (svc *Service) deleteOffline(o *offlineStream) *APIError {
	name := o.def.Config.Name
	var names, ids []string
	for _, c := range o.consumers {
		names = append(names, c.Config.Name)
		ids = append(ids, c.ID)
	}
	if aerr := svc.deleteDefinitions(name, names); aerr != nil {
		return aerr
	}
	svc.mu.Lock()
	delete(svc.offline, name)
	svc.mu.Unlock()
	svc.dropStreamData(name, o.def.ID, ids)
	svc.log.Info("offline stream deleted", "stream", name)
	return nil
}

// deleteDefinitions deletes the definitions of a stream's consumers, then
// the stream's: a failure leaves no consumer without its stream.
func (svc *Service) deleteDefinitions(stream string, consumers []string) *APIError {
	for _, c := range consumers {
		if err := svc.cfg.Definitions.Delete(consumerDefKey(stream, c)); err != nil {
			return ErrStreamGeneral(err)
		}
	}
	if err := svc.cfg.Definitions.Delete(streamDefKey(stream)); err != nil {
		return ErrStreamGeneral(err)
	}
	return nil
}

// dropStreamData removes what a deleted stream leaves behind: the state
// records of the stream and of its consumers (by id), and its log.
func (svc *Service) dropStreamData(name, id string, consumerIDs []string) {
	tombstones := []stateRecord{{key: streamStateKey(id)}}
	for _, c := range consumerIDs {
		tombstones = append(tombstones, stateRecord{key: consumerStateKey(c)})
	}
	if err := svc.state.write(tombstones); err != nil {
		svc.log.Warn("jetstream: state of a deleted stream left in the state log", "stream", name, "err", err)
	}
	if err := svc.cfg.Logs.DeleteLog(name); err != nil {
		svc.log.Error("jetstream: delete the log of a deleted stream", "stream", name, "topic", TopicName(name), "err", err)
	}
}

// overlapsOtherStream reports whether cfg's subjects overlap those of a
// stream of another name, loaded or offline.
func (svc *Service) overlapsOtherStream(cfg StreamConfig) bool {
	svc.mu.RLock()
	loaded := slices.Collect(maps.Values(svc.streams))
	var taken [][]string
	for _, o := range svc.offline {
		taken = append(taken, o.def.Config.Subjects)
	}
	svc.mu.RUnlock()
	for _, s := range loaded {
		if s.name != cfg.Name {
			taken = append(taken, s.config().Subjects)
		}
	}
	for _, subjects := range taken {
		for _, p := range subjects {
			for _, q := range cfg.Subjects {
				if subjectsCollide(p, q) {
					return true
				}
			}
		}
	}
	return false
}

func (svc *Service) putDefinition(key string, def any) error {
	b, err := json.Marshal(def)
	if err != nil {
		return err
	}
	return svc.cfg.Definitions.Put(key, b)
}

func (s *stream) config() StreamConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}
