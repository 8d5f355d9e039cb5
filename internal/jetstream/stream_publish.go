package jetstream

import (
	"strconv"
	"time"
)

// PubAck is a publish's acknowledgement, nats-server's JSON.
type PubAck struct {
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// publishLocked checks a message against the stream's rules and its
// expectations, then appends it and applies the limits. It returns the
// acknowledgement, which its caller sends once the log has committed the
// message.
func (s *stream) publishLocked(subject string, header, data []byte, now time.Time) (PubAck, *APIError) {
	if s.deleted {
		return PubAck{}, ErrStreamNotFound
	}
	if err := s.catchUpLocked(now); err != nil {
		s.svc.log.Error("jetstream: index records appended by Kafka producers", "stream", s.name, "err", err)
		return PubAck{}, ErrStreamStore(err)
	}
	cfg := &s.cfg
	if cfg.Sealed {
		return PubAck{}, ErrStreamSealed
	}
	if len(header) > maxHeaderSize {
		return PubAck{}, ErrHeaderTooLarge
	}
	if cfg.MaxMsgSize > 0 && len(header)+len(data) > int(cfg.MaxMsgSize) {
		return PubAck{}, ErrMsgTooLarge
	}
	var msgID, rollup string
	if len(header) > 0 {
		var err *APIError
		if msgID, rollup, err = s.checkHeadersLocked(subject, header); err != nil {
			return PubAck{}, err
		}
		if msgID != "" {
			s.dedupe.expire(now, cfg.Duplicates)
			if seq, dup := s.dedupe.lookup(msgID); dup {
				return PubAck{Stream: s.name, Seq: seq, Duplicate: true}, nil
			}
		}
	}
	size := storedSize(subject, header, data)
	if cfg.Discard == DiscardNew {
		switch {
		case cfg.MaxMsgs > 0 && s.msgs >= uint64(cfg.MaxMsgs):
			return PubAck{}, ErrMaxMsgs
		case cfg.MaxBytes > 0 && s.bytes+size > uint64(cfg.MaxBytes):
			return PubAck{}, ErrMaxBytes
		case cfg.DiscardNewPer && cfg.MaxMsgsPer > 0 && s.subjectCount(subject) >= uint64(cfg.MaxMsgsPer):
			return PubAck{}, ErrMaxMsgsPerSubject
		}
	}
	off, err := s.log.Append(encodeRecord(subject, header, data, now))
	if err != nil {
		s.svc.log.Error("jetstream: append to a stream", "stream", s.name, "err", err)
		return PubAck{}, ErrStreamStore(err)
	}
	if seqOf(off) != s.last+1 {
		// A Kafka producer appended between the catch-up and this append.
		if err := s.indexLogLocked(seqOf(off), now); err != nil {
			return PubAck{}, ErrStreamStore(err)
		}
	}
	m := &Message{Subject: subject, Seq: seqOf(off), Time: now.Truncate(time.Millisecond).UTC(), Header: header, Data: data}
	s.storeLocked(m, msgID, now)
	s.applyLimitsLocked(m, rollup)
	if cfg.Retention == InterestPolicy && !s.interestInLocked(m) {
		s.removeLocked(m.Seq, m.Subject, true)
	}
	return PubAck{Stream: s.name, Seq: m.Seq}, nil
}

// checkHeadersLocked checks the headers of a message to publish: the
// features Wharf does not implement and the expectations it states. It
// returns the message's id and roll-up.
func (s *stream) checkHeadersLocked(subject string, header []byte) (msgID, rollup string, _ *APIError) {
	switch {
	case headerValue(header, hdrTTL) != "":
		return "", "", ErrMsgTTLDisabled
	case headerValue(header, hdrIncr) != "":
		return "", "", apiErr(400, 10168, "message counters is disabled")
	case headerValue(header, hdrSchedule) != "":
		return "", "", apiErr(400, 10188, "message schedules is disabled")
	case headerValue(header, hdrBatchID) != "":
		return "", "", apiErr(400, 10205, "batch publish is disabled")
	}
	if v := headerValue(header, hdrExpectedStream); v != "" && v != s.name {
		return "", "", ErrStreamNotMatch
	}
	if v := headerValue(header, hdrExpectedLastSeq); v != "" {
		if seq, err := strconv.ParseUint(v, 10, 64); err != nil || seq != s.last {
			return "", "", ErrWrongLastSequence(s.last)
		}
	}
	if v := headerValue(header, hdrExpectedLastSubjSeq); v != "" {
		subj := subject
		if other := headerValue(header, hdrExpectedLastSubject); other != "" {
			subj = other
		}
		last := s.lastOf(subj)
		if seq, err := strconv.ParseUint(v, 10, 64); err != nil || seq != last {
			return "", "", ErrWrongLastSequence(last)
		}
	}
	if v := headerValue(header, hdrExpectedLastMsgID); v != "" && v != s.lastMsgID {
		return "", "", ErrWrongLastMsgID(s.lastMsgID)
	}
	rollup = headerValue(header, hdrRollup)
	if rollup != "" {
		if !s.cfg.AllowRollup || s.cfg.DenyPurge {
			return "", "", ErrRollupNotPermitted
		}
		if rollup != rollupSubject && rollup != rollupAll {
			return "", "", apiErr(500, 10111, "rollup value invalid: %q", rollup)
		}
	}
	return headerValue(header, hdrMsgID), rollup, nil
}

// lastOf is the newest sequence among the subjects pattern takes (a
// literal subject's, usually), 0 for none.
func (s *stream) lastOf(pattern string) uint64 {
	return s.subjects.lastAmong(filter{pattern})
}

func (s *stream) subjectCount(subject string) uint64 {
	if e := s.subjects[subject]; e != nil {
		return uint64(len(e.seqs))
	}
	return 0
}
