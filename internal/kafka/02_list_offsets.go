package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// ListOffsets (key 2), v1-v11.
//
// Timestamps, answered as a broker without tiered storage answers them:
//
//	-2 earliest (log start offset)      -1 latest (high watermark)
//	-3 max timestamp (v7+, KIP-734)     -4 earliest local (v8+): log start
//	-5 latest tiered (v9+): -1          -6 earliest pending upload (v11+): -1
//	>= 0: the first record with a timestamp >= it, or offset -1 if none.
//
// A special timestamp sent below the version that introduced it, or any
// other negative one, is UNSUPPORTED_VERSION for that partition; a
// partition listed twice is INVALID_REQUEST. READ_COMMITTED sees the same
// offsets as READ_UNCOMMITTED while there are no transactions (LSO = HW).
// CurrentLeaderEpoch (v4+) is checked; LeaderEpoch answers our constant
// epoch where an offset is returned. A topic needs DESCRIBE (else
// TOPIC_AUTHORIZATION_FAILED).

const (
	listLatest              = -1
	listEarliest            = -2
	listMaxTimestamp        = -3
	listEarliestLocal       = -4
	listLatestTiered        = -5
	listEarliestPendingLoad = -6
)

// listOffsetsMinVersion is the first request version allowed to use each
// special timestamp.
var listOffsetsMinVersion = map[int64]int16{
	listLatest:              0,
	listEarliest:            0,
	listMaxTimestamp:        7,
	listEarliestLocal:       8,
	listLatestTiered:        9,
	listEarliestPendingLoad: 11,
}

func (s *Server) handleListOffsets(r *request, req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)

	type tp struct {
		topic     string
		partition int32
	}
	seen := make(map[tp]int)
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[tp{rt.Topic, rp.Partition}]++
		}
	}

	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		var (
			t        *broker.Topic
			topicErr error = errTopicDenied
		)
		if s.allowed(r, opDescribe, resTopic, rt.Topic) {
			t, topicErr = s.broker.Topic(rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case seen[tp{rt.Topic, rp.Partition}] > 1:
				sp.ErrorCode = kerr.InvalidRequest.Code
			case topicErr != nil:
				sp.ErrorCode = errorCode(topicErr)
			default:
				s.listPartitionOffset(req.Version, req.IsolationLevel == 1, t, rp, &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// listPartitionOffset answers one partition into sp.
// With readCommitted (isolation level 1, v2+) the latest offset is the last
// stable offset.
func (s *Server) listPartitionOffset(version int16, readCommitted bool, t *broker.Topic, rp kmsg.ListOffsetsRequestTopicPartition,
	sp *kmsg.ListOffsetsResponseTopicPartition) {
	p, err := t.Partition(rp.Partition)
	if err != nil {
		sp.ErrorCode = errorCode(err)
		return
	}
	epoch := rp.CurrentLeaderEpoch
	if version < 4 {
		epoch = -1 // no fencing before v4; the leader check stays
	}
	if code := checkLeaderEpoch(p, s.broker.NodeID(), epoch); code != 0 {
		sp.ErrorCode = code
		return
	}
	if p.Offline() != nil {
		sp.ErrorCode = kerr.KafkaStorageError.Code
		return
	}
	ts := rp.Timestamp
	if ts < 0 {
		minVersion, known := listOffsetsMinVersion[ts]
		if !known || version < minVersion {
			sp.ErrorCode = kerr.UnsupportedVersion.Code
			return
		}
	}

	sp.Timestamp = -1
	switch ts {
	case listEarliest, listEarliestLocal:
		sp.Offset = p.StartOffset()
	case listLatest:
		sp.Offset = p.HighWatermark()
		if readCommitted {
			sp.Offset = p.LastStableOffset()
		}
	case listLatestTiered, listEarliestPendingLoad:
		sp.Offset = -1 // nothing is tiered
		return
	case listMaxTimestamp:
		offset, timestamp := p.MaxTimestamp()
		sp.Offset, sp.Timestamp = offset, timestamp
		if offset < 0 {
			return // empty partition: -1/-1 as Kafka answers
		}
	default:
		offset, timestamp, found, err := p.OffsetForTime(ts)
		if err != nil {
			sp.ErrorCode = errorCode(err)
			return
		}
		if !found {
			sp.Offset = -1
			return
		}
		sp.Offset, sp.Timestamp = offset, timestamp
	}
	_, sp.LeaderEpoch, _ = p.Leadership(s.broker.NodeID())
}
