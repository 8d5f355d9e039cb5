package jetstream

import (
	"maps"
	"slices"
	"time"
)

// StreamInfo is STREAM.INFO's answer, nats-server's JSON.
type StreamInfo struct {
	Config    StreamConfig `json:"config"`
	Created   time.Time    `json:"created"`
	State     StreamState  `json:"state"`
	Cluster   *ClusterInfo `json:"cluster,omitempty"`
	TimeStamp time.Time    `json:"ts"`
}

// StreamState is a stream's state in StreamInfo.
type StreamState struct {
	Msgs        uint64            `json:"messages"`
	Bytes       uint64            `json:"bytes"`
	FirstSeq    uint64            `json:"first_seq"`
	FirstTime   time.Time         `json:"first_ts"`
	LastSeq     uint64            `json:"last_seq"`
	LastTime    time.Time         `json:"last_ts"`
	NumDeleted  int               `json:"num_deleted,omitempty"`
	Deleted     []uint64          `json:"deleted,omitempty"`
	NumSubjects int               `json:"num_subjects,omitempty"`
	Subjects    map[string]uint64 `json:"subjects,omitempty"`
	Consumers   int               `json:"consumer_count"`
}

// ClusterInfo names the server leading the stream: on a single node, the
// node.
type ClusterInfo struct {
	Leader string `json:"leader,omitempty"`
}

// infoOptions are STREAM.INFO's request options.
type infoOptions struct {
	deletedDetails bool
	subjectsFilter string
}

// MaxInfoSubjects bounds the subjects one STREAM.INFO lists, nats-server's
// page size.
const MaxInfoSubjects = 100_000

// StreamInfo returns a stream's info; with subjectsFilter, the message
// count of each subject it takes (up to MaxInfoSubjects), with
// deletedDetails the deleted sequences between first and last.
func (svc *Service) StreamInfo(name, subjectsFilter string, deletedDetails bool) (*StreamInfo, *APIError) {
	s, err := svc.stream(name)
	if err != nil {
		return nil, err
	}
	return s.info(infoOptions{deletedDetails: deletedDetails, subjectsFilter: subjectsFilter}), nil
}

// Streams returns the info of every stream whose subjects overlap
// subject (all when empty), sorted by name.
func (svc *Service) Streams(subject string) []*StreamInfo {
	var infos []*StreamInfo
	for _, name := range svc.StreamNames(subject) {
		if s, _ := svc.stream(name); s != nil {
			infos = append(infos, s.info(infoOptions{}))
		}
	}
	return infos
}

func (s *stream) info(opt infoOptions) *StreamInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := &StreamInfo{
		Config:    s.cfg,
		Created:   s.created,
		Cluster:   &ClusterInfo{Leader: s.svc.cfg.ServerName},
		TimeStamp: time.Now().UTC(),
	}
	st := &info.State
	st.Msgs, st.Bytes, st.Consumers = s.msgs, s.bytes, len(s.consumers)
	st.NumSubjects = len(s.subjects)
	if s.last > 0 {
		st.FirstSeq, st.LastSeq, st.LastTime = s.first, s.last, s.lastTime
		if m, err := s.oldestLocked(); err == nil && m != nil {
			st.FirstSeq, st.FirstTime = m.Seq, m.Time
		} else {
			st.FirstSeq = s.first
		}
	}
	if s.msgs > 0 {
		st.NumDeleted = int(st.LastSeq - st.FirstSeq + 1 - s.msgs)
	}
	if opt.deletedDetails && st.NumDeleted > 0 {
		st.Deleted = s.deletedLocked(st.FirstSeq)
	}
	if opt.subjectsFilter != "" {
		st.Subjects = s.subjects.counts(filter{opt.subjectsFilter})
		if len(st.Subjects) > MaxInfoSubjects {
			keys := slices.Sorted(maps.Keys(st.Subjects))
			for _, k := range keys[MaxInfoSubjects:] {
				delete(st.Subjects, k)
			}
		}
	}
	return info
}

// deletedLocked lists the sequences between from and last no live
// message holds.
func (s *stream) deletedLocked(from uint64) []uint64 {
	live := make([]uint64, 0, s.msgs)
	for _, e := range s.subjects {
		live = append(live, e.seqs...)
	}
	slices.Sort(live)
	var deleted []uint64
	next := from
	for _, seq := range live {
		for ; next < seq; next++ {
			deleted = append(deleted, next)
		}
		next = seq + 1
	}
	for ; next <= s.last; next++ {
		deleted = append(deleted, next)
	}
	return deleted
}

// PurgeRequest is STREAM.PURGE's request: which messages to remove (all
// by default; those filter takes; those below Seq; all but the newest
// Keep).
type PurgeRequest struct {
	Filter string `json:"filter,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Keep   uint64 `json:"keep,omitempty"`
}

// Purge removes messages from a stream and returns how many.
func (svc *Service) Purge(name string, req PurgeRequest) (uint64, *APIError) {
	s, aerr := svc.stream(name)
	if aerr != nil {
		return 0, aerr
	}
	s.mu.Lock()
	if s.cfg.Sealed {
		s.mu.Unlock()
		return 0, ErrStreamSealed
	}
	if s.cfg.DenyPurge {
		s.mu.Unlock()
		return 0, ErrPurgeNotPermitted
	}
	purged := s.purgeLocked(req)
	s.mu.Unlock()
	if err := svc.writeStreamState(s); err != nil {
		return purged, ErrStreamStore(err)
	}
	return purged, nil
}

func (s *stream) purgeLocked(req PurgeRequest) uint64 {
	if req.Seq == 1 {
		return 0
	}
	before := s.msgs
	if req.Filter == "" || req.Filter == ">" {
		switch {
		case req.Keep == 0 && req.Seq == 0:
			s.removeBelowLocked(s.last + 1)
		case req.Seq > 1:
			s.removeBelowLocked(min(req.Seq, s.last+1))
		}
		if req.Keep == 0 {
			s.afterPurgeLocked()
			return before - s.msgs
		}
	}
	f := filter{req.Filter}
	if req.Filter == "" {
		f = nil
	}
	var seqs []uint64
	bySeq := map[uint64]string{}
	s.subjects.matching(f, func(subj string, e *subjectMsgs) {
		for _, seq := range e.seqs {
			if req.Seq == 0 || seq < req.Seq {
				seqs = append(seqs, seq)
				bySeq[seq] = subj
			}
		}
	})
	slices.Sort(seqs)
	if req.Keep > 0 {
		if uint64(len(seqs)) <= req.Keep {
			return 0
		}
		seqs = seqs[:uint64(len(seqs))-req.Keep]
	}
	for _, seq := range seqs {
		s.removeLocked(seq, bySeq[seq], true)
	}
	s.afterPurgeLocked()
	return before - s.msgs
}

// afterPurgeLocked moves the consumers past what a purge removed.
func (s *stream) afterPurgeLocked() {
	if _, err := s.oldestLocked(); err != nil {
		s.svc.log.Error("jetstream: read the head of a stream", "stream", s.name, "err", err)
	}
	for _, c := range s.consumers {
		c.purgedLocked(s.first)
	}
}

// MsgRequest is STREAM.MSG.GET's and DIRECT.GET's request: a sequence,
// the last message of a subject, or the first at or after Seq of one.
type MsgRequest struct {
	Seq        uint64 `json:"seq,omitempty"`
	LastBySubj string `json:"last_by_subj,omitempty"`
	NextBySubj string `json:"next_by_subj,omitempty"`
}

// GetMsg returns the message a request names, ErrNoMessageFound if none.
func (svc *Service) GetMsg(name string, req MsgRequest) (*Message, *APIError) {
	s, aerr := svc.stream(name)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	seq := s.findLocked(req)
	s.mu.Unlock()
	if seq == 0 {
		return nil, ErrNoMessageFound
	}
	m, err := readMessage(s.log, s.name, seq)
	if err != nil {
		return nil, ErrStreamGeneral(err)
	}
	if m == nil {
		return nil, ErrNoMessageFound
	}
	s.mu.Lock()
	live := s.subjects.has(m.Subject, m.Seq)
	s.mu.Unlock()
	if !live {
		return nil, ErrNoMessageFound
	}
	return m, nil
}

// findLocked returns the sequence of the live message req names, 0 if
// none. A request by sequence alone names a message the caller checks
// is live once read.
func (s *stream) findLocked(req MsgRequest) uint64 {
	switch {
	case req.LastBySubj != "":
		return s.lastOf(req.LastBySubj)
	case req.NextBySubj != "":
		return s.subjects.firstAfter(filter{req.NextBySubj}, max(req.Seq, 1)-1)
	case req.Seq > 0 && req.Seq >= s.first && req.Seq <= s.last:
		return req.Seq
	}
	return 0
}

// DeleteMsg removes one message from a stream.
func (svc *Service) DeleteMsg(name string, seq uint64) *APIError {
	s, aerr := svc.stream(name)
	if aerr != nil {
		return aerr
	}
	s.mu.Lock()
	if s.cfg.Sealed {
		s.mu.Unlock()
		return ErrStreamSealed
	}
	if s.cfg.DenyDelete {
		s.mu.Unlock()
		return ErrMsgDeleteNotPermitted
	}
	s.mu.Unlock()
	m, err := readMessage(s.log, s.name, seq)
	if err != nil {
		return ErrStreamGeneral(err)
	}
	s.mu.Lock()
	removed := m != nil && s.removeLocked(seq, m.Subject, true)
	s.mu.Unlock()
	if !removed {
		return ErrMsgDeleteNoMessage
	}
	if err := svc.writeStreamState(s); err != nil {
		return ErrStreamStore(err)
	}
	return nil
}
