package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Fetch (key 1), v4-v18.
//
// Long poll: unless MinBytes <= 0 or MaxWait <= 0, a fetch with less than
// MinBytes of records and no partition error registers a wake-up on every
// partition (Partition.Notify) and waits for more to read (an append; in a
// cluster a move of the high watermark or of the leadership), the MaxWait
// timer or server shutdown, then reads again.
//
// Sizes (KIP-74): partitions are read in order; each gets at most
// PartitionMaxBytes and what is left of MaxBytes, except that the first
// partition that has records returns at least one whole batch however large.
// Batches are never cut (a log read returns whole batches).
//
// Offsets: a fetch offset below the log start offset or above the high
// watermark is OFFSET_OUT_OF_RANGE; at the high watermark the partition
// returns no records. LastStableOffset is the first offset of the oldest
// open transaction (else the high watermark); read_committed fetches
// (isolation level 1) return only batches below it, with the aborted
// transactions overlapping them in AbortedTransactions, so clients drop
// the aborted batches. As in Kafka, a partition
// with an error reports -1 for the offsets.
//
// Sessions (KIP-227, v7+): see fetch_session.go. v13+ addresses topics by ID
// (unknown: UNKNOWN_TOPIC_ID). Before v10 a client cannot read zstd, so a
// partition whose data has zstd batches answers UNSUPPORTED_COMPRESSION_TYPE.
// CurrentLeaderEpoch (v9+) is checked against our constant epoch.
// Replica-only fields (ReplicaID, ReplicaState, LastFetchedEpoch, the v17+
// tagged fields) are ignored: there are no followers, and a single node's
// log never diverges. Each topic needs READ (else its partitions are
// TOPIC_AUTHORIZATION_FAILED).
//
// This file turns the request into a scope of partitions and the reads into
// a response; fetch_poll.go reads and waits; fetch_write.go writes the record
// data with sendfile.

func (s *Server) handleFetch(r *request, req *kmsg.FetchRequest) (*response, error) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	scope, errCode := s.openFetchScope(req)
	if errCode != 0 {
		resp.ErrorCode = errCode
		return &response{msg: resp}, nil
	}
	defer scope.close()
	if scope.session != nil {
		resp.SessionID = scope.session.id
	}

	targets := s.resolveFetchTargets(r, req.Version, scope.partitions)
	reads := s.pollFetch(r, req, targets)
	fd := buildFetchResponse(req, resp, scope, targets, reads)
	return &response{msg: resp, fetch: fd}, nil
}

// fetchScope is the set of partitions one fetch covers: the request's own
// (sessionless, or a new session) or a session's after applying the
// request's changes (incremental).
type fetchScope struct {
	session     *fetchSession // locked until close; nil without a session
	incremental bool
	partitions  []*sessionPartition
}

func (sc *fetchScope) close() {
	if sc.session != nil {
		sc.session.mu.Unlock()
	}
}

// openFetchScope applies the KIP-227 session rules, returning a top-level
// error code when the session cannot be used.
func (s *Server) openFetchScope(req *kmsg.FetchRequest) (*fetchScope, int16) {
	positions := requestPositions(req)
	usesIDs := req.Version >= 13
	sessionless := func() *fetchScope {
		sc := &fetchScope{}
		for _, pos := range positions {
			sc.partitions = append(sc.partitions, &sessionPartition{fetchPosition: pos})
		}
		return sc
	}

	switch {
	case req.Version < 7 || (req.SessionID == 0 && req.SessionEpoch == -1):
		return sessionless(), 0

	case req.SessionEpoch == -1: // close the session, fetch without one
		s.sessions.remove(req.SessionID)
		return sessionless(), 0

	case req.SessionEpoch == 0: // (re)start a session with the request's partitions
		if req.SessionID != 0 {
			s.sessions.remove(req.SessionID)
		}
		sess := s.sessions.create(positions, usesIDs)
		if sess == nil {
			return sessionless(), 0 // cache full: the client goes on without
		}
		return &fetchScope{session: sess, partitions: append([]*sessionPartition(nil), sess.partitions...)}, 0
	}

	sess := s.sessions.lookup(req.SessionID)
	if sess == nil {
		return nil, kerr.FetchSessionIDNotFound.Code
	}
	if req.SessionEpoch != sess.epoch {
		sess.mu.Unlock()
		return nil, kerr.InvalidFetchSessionEpoch.Code
	}
	if sess.usesIDs != usesIDs {
		sess.mu.Unlock()
		return nil, kerr.FetchSessionTopicIDError.Code
	}
	for _, pos := range positions {
		sess.upsert(pos)
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			key := sessionKey{partition: p}
			if usesIDs {
				key.topicID = ft.TopicID
			} else {
				key.topic = ft.Topic
			}
			sess.forget(key)
		}
	}
	sess.epoch = nextEpoch(sess.epoch)
	return &fetchScope{
		session:     sess,
		incremental: true,
		partitions:  append([]*sessionPartition(nil), sess.partitions...),
	}, 0
}

// requestPositions lists the partitions of a fetch request in order.
func requestPositions(req *kmsg.FetchRequest) []fetchPosition {
	var out []fetchPosition
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			pos := fetchPosition{
				key:         sessionKey{partition: rp.Partition},
				fetchOffset: rp.FetchOffset,
				maxBytes:    rp.PartitionMaxBytes,
				leaderEpoch: -1,
			}
			if req.Version >= 13 {
				pos.key.topicID = rt.TopicID
			} else {
				pos.key.topic = rt.Topic
			}
			if req.Version >= 9 {
				pos.leaderEpoch = rp.CurrentLeaderEpoch
			}
			out = append(out, pos)
		}
	}
	return out
}

// buildFetchResponse fills resp from the reads, leaving out unchanged
// partitions of an incremental session, and returns the record data to
// write. It takes over the reads' slices.
func buildFetchResponse(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, scope *fetchScope,
	targets []fetchTarget, reads []partitionRead) *fetchData {
	type placed struct {
		topic, partition int
		slice            *replica.Slice
	}
	var (
		data     []placed
		topicIdx = make(map[sessionKey]int)
		returned = make(map[*sessionPartition]bool)
	)
	for i, tg := range targets {
		rd := reads[i]
		sp := tg.sp
		if scope.incremental && !partitionChanged(sp, rd) {
			continue
		}
		if scope.session != nil {
			sp.sentHighWatermark, sp.sentLastStable, sp.sentLogStart = rd.highWatermark, rd.lastStable, rd.logStart
		}

		// Group partitions under their topic, in first-seen order.
		// Unresolved v13 IDs each keep their own entry.
		tk := sessionKey{topic: tg.topic, topicID: tg.topicID}
		ti, ok := topicIdx[tk]
		if !ok {
			ti = len(resp.Topics)
			topicIdx[tk] = ti
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = tg.topic, tg.topicID
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = sp.key.partition
		rp.ErrorCode = rd.errCode
		rp.HighWatermark = rd.highWatermark
		rp.LastStableOffset = rd.lastStable
		rp.LogStartOffset = rd.logStart
		if req.IsolationLevel == 1 {
			rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			for _, a := range rd.aborted {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
				rp.AbortedTransactions = append(rp.AbortedTransactions, at)
			}
		}
		// Empty, not null: librdkafka reads a null record set as an
		// invalid MessageSet size.
		rp.RecordBatches = []byte{}
		if rd.slice != nil {
			returned[sp] = true
			data = append(data, placed{ti, len(resp.Topics[ti].Partitions), rd.slice})
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, rp)
	}
	if scope.session != nil {
		scope.session.moveToEnd(returned)
	}

	// Only now are the partition entries at their final addresses.
	fd := &fetchData{}
	for _, d := range data {
		rp := &resp.Topics[d.topic].Partitions[d.partition]
		if req.Version < 10 {
			copyForOldFetch(rp, d.slice)
			continue
		}
		fd.parts = append(fd.parts, fetchPart{batches: &rp.RecordBatches, slice: d.slice})
	}
	return fd
}

// partitionChanged reports whether an incremental response must include a
// session partition.
func partitionChanged(sp *sessionPartition, rd partitionRead) bool {
	return rd.errCode != 0 || rd.slice != nil ||
		rd.highWatermark != sp.sentHighWatermark ||
		rd.lastStable != sp.sentLastStable ||
		rd.logStart != sp.sentLogStart
}

// copyForOldFetch answers a Fetch < v10 partition: such clients cannot
// decode zstd, so data with a zstd batch is UNSUPPORTED_COMPRESSION_TYPE, as
// Kafka answers; otherwise the bytes are copied into the response.
func copyForOldFetch(rp *kmsg.FetchResponseTopicPartition, slice *replica.Slice) {
	defer slice.Release()
	b, err := slice.Bytes()
	if err != nil {
		rp.ErrorCode = errorCode(err)
		return
	}
	for rest := b; len(rest) > 0; {
		h, err := record.ParseHeader(rest)
		if err != nil {
			break // the broker stores whole, verified batches; be lenient
		}
		if h.Compression() == record.Zstd {
			rp.ErrorCode = kerr.UnsupportedCompressionType.Code
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			return
		}
		rest = rest[h.Size():]
	}
	rp.RecordBatches = b
}
