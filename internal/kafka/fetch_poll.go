package kafka

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/replica"
)

// The reading half of Fetch: resolving the partitions of a fetch against
// the broker, reading them under the KIP-74 size rules, and the long poll
// that waits for more to read.

// fetchTarget is a scope partition resolved against the broker.
type fetchTarget struct {
	sp      *sessionPartition
	topic   string   // resolved name ("" for an unknown topic ID)
	topicID [16]byte // for v13+ responses
	p       *broker.Partition
	errCode int16 // set when p could not be resolved or is fenced
}

// resolveFetchTargets looks up every partition once per request, and
// checks that r may READ its topic (else TOPIC_AUTHORIZATION_FAILED); a
// topic created while the fetch waits is not added to it.
func (s *Server) resolveFetchTargets(r *request, version int16, parts []*sessionPartition) []fetchTarget {
	type topicLookup struct {
		t   *broker.Topic
		err error
	}
	topics := make(map[sessionKey]topicLookup)
	targets := make([]fetchTarget, len(parts))
	for i, sp := range parts {
		tg := &targets[i]
		tg.sp, tg.topic, tg.topicID = sp, sp.key.topic, sp.key.topicID

		tk := sessionKey{topic: sp.key.topic, topicID: sp.key.topicID}
		tl, seen := topics[tk]
		if !seen {
			if version >= 13 {
				tl.t, tl.err = s.broker.TopicByID(sp.key.topicID)
			} else if !s.allowed(r, opRead, resTopic, sp.key.topic) {
				tl.err = errTopicDenied
			} else {
				tl.t, tl.err = s.broker.Topic(sp.key.topic)
			}
			if tl.err == nil && version >= 13 && !s.allowed(r, opRead, resTopic, tl.t.Name()) {
				tl.t, tl.err = nil, errTopicDenied
			}
			topics[tk] = tl
		}
		switch {
		case errors.Is(tl.err, errTopicDenied):
			tg.errCode = kerr.TopicAuthorizationFailed.Code
			continue
		case tl.err != nil && version >= 13:
			tg.errCode = kerr.UnknownTopicID.Code
			continue
		case tl.err != nil:
			tg.errCode = errorCode(tl.err)
			continue
		}
		tg.topic, tg.topicID = tl.t.Name(), tl.t.ID()
		p, err := tl.t.Partition(sp.key.partition)
		if err != nil {
			tg.errCode = errorCode(err)
			continue
		}
		tg.p = p
		tg.errCode = checkLeaderEpoch(p, s.broker.NodeID(), sp.leaderEpoch)
	}
	return targets
}

// partitionRead is what one partition answers in one pass.
type partitionRead struct {
	errCode                   int16
	highWatermark, lastStable int64
	logStart                  int64
	slice                     *replica.Slice      // nil: no records
	aborted                   []broker.AbortedTxn // read_committed: aborted transactions overlapping the read
}

func releaseReads(reads []partitionRead) {
	for i := range reads {
		if reads[i].slice != nil {
			reads[i].slice.Release()
			reads[i].slice = nil
		}
	}
}

// pollFetch reads the targets, waiting for more until MinBytes are
// available, MaxWait passes, a partition fails or the server shuts down.
func (s *Server) pollFetch(r *request, req *kmsg.FetchRequest, targets []fetchTarget) []partitionRead {
	deadline := r.received.Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	var (
		wake  chan struct{}
		timer *time.Timer
	)
	for {
		wait := req.MinBytes > 0 && time.Now().Before(deadline) && !s.shuttingDown()
		if wait {
			// Register before reading, so an append (or a commit)
			// between the read and the wait is not missed.
			if wake == nil {
				wake = make(chan struct{}, 1)
			}
			notifyAll(targets, wake)
		}
		reads, total, failed := readFetchTargets(targets, req.MaxBytes, req.IsolationLevel == 1)
		if !wait || failed || total >= int64(req.MinBytes) {
			if wait {
				unnotifyAll(targets, wake)
			}
			return reads
		}
		releaseReads(reads)
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
			defer timer.Stop()
		}
		if s.testHookFetchWaiting != nil {
			s.testHookFetchWaiting()
		}
		waitStart := time.Now()
		select {
		case <-wake:
		case <-timer.C:
		case <-s.done:
		}
		r.waited += time.Since(waitStart)
		unnotifyAll(targets, wake)
	}
}

func notifyAll(targets []fetchTarget, wake chan struct{}) {
	for _, tg := range targets {
		if tg.p != nil {
			tg.p.Notify(wake)
		}
	}
}

func unnotifyAll(targets []fetchTarget, wake chan struct{}) {
	for _, tg := range targets {
		if tg.p != nil {
			tg.p.Unnotify(wake)
		}
	}
	select { // drop a wake-up that raced with the unregistering
	case <-wake:
	default:
	}
}

func (s *Server) shuttingDown() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// readFetchTargets reads every target once, applying the KIP-74 limits. It
// returns the reads, the record bytes found, and whether any partition
// answered with an error.
func readFetchTargets(targets []fetchTarget, maxBytes int32, readCommitted bool) (reads []partitionRead, total int64, failed bool) {
	reads = make([]partitionRead, len(targets))
	first := true // no partition has returned records yet: at least one batch may exceed the limits
	for i, tg := range targets {
		rd := &reads[i]
		code, slice := readFetchTarget(tg, rd, int64(maxBytes)-total, first, readCommitted)
		if code != 0 {
			*rd = partitionRead{errCode: code, highWatermark: -1, lastStable: -1, logStart: -1}
			failed = true
			continue
		}
		if slice != nil {
			rd.slice = slice
			total += slice.Len()
			first = false
		}
	}
	return reads, total, failed
}

// readFetchTarget reads one partition with at most min(PartitionMaxBytes,
// remaining) bytes (or one batch if first), filling rd's offsets. A
// read_committed read stops at the last stable offset and lists the
// aborted transactions its batches may belong to.
func readFetchTarget(tg fetchTarget, rd *partitionRead, remaining int64, first, readCommitted bool) (int16, *replica.Slice) {
	if tg.errCode != 0 {
		return tg.errCode, nil
	}
	p := tg.p
	if p.Offline() != nil {
		return kerr.KafkaStorageError.Code, nil
	}
	offset := tg.sp.fetchOffset
	if offset < p.StartOffset() || offset > p.HighWatermark() {
		return kerr.OffsetOutOfRange.Code, nil
	}
	limit := min(int64(tg.sp.maxBytes), remaining)
	var slice *replica.Slice
	if limit > 0 || first {
		var err error
		if readCommitted {
			slice, _, err = p.ReadCommitted(offset, max(limit, 1))
		} else {
			slice, err = p.Read(offset, max(limit, 1))
		}
		if err != nil {
			return errorCode(err), nil
		}
		if n := slice.Len(); n == 0 || (!first && n > limit) {
			// Nothing there, or a batch that only the first
			// partition with records may return over the limit.
			slice.Release()
			slice = nil
		} else {
			p.CountFetched(n)
		}
	}
	// Read the offsets after the data, so the high watermark covers
	// everything returned.
	rd.highWatermark = p.HighWatermark()
	rd.lastStable = min(p.LastStableOffset(), rd.highWatermark)
	rd.logStart = p.StartOffset()
	if readCommitted && slice != nil {
		rd.aborted = p.AbortedTxns(offset, rd.lastStable)
	}
	return 0, slice
}
