package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch (key 23), v2-v4 (Kafka 4.0 removed v0-v1).
//
// For each partition, where the requested leader epoch ends in the
// leader's log (broker.Partition.EpochEnd): franz-go asks it after a leader
// change to tell whether the log it consumed was truncated (KIP-320). Only
// the leader answers (else NOT_LEADER_OR_FOLLOWER); a CurrentLeaderEpoch
// below the partition's is FENCED_LEADER_EPOCH, above it
// UNKNOWN_LEADER_EPOCH, as in Fetch. An epoch the log has not reached
// answers UNDEFINED_EPOCH_OFFSET (-1, -1) with no error, as Kafka does.
// ReplicaID is ignored: Wharf's replicas follow over Raft, not Kafka's
// protocol, so every caller is a client. A topic needs DESCRIBE (else
// TOPIC_AUTHORIZATION_FAILED).

func (s *Server) handleOffsetForLeaderEpoch(r *request, req *kmsg.OffsetForLeaderEpochRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			if !s.allowed(r, opDescribe, resTopic, rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else {
				s.epochEnd(rt.Topic, rp, &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// epochEnd answers one partition into sp.
func (s *Server) epochEnd(topic string, rp kmsg.OffsetForLeaderEpochRequestTopicPartition,
	sp *kmsg.OffsetForLeaderEpochResponseTopicPartition) {
	t, err := s.broker.Topic(topic)
	if err != nil {
		sp.ErrorCode = errorCode(err)
		return
	}
	p, err := t.Partition(rp.Partition)
	if err != nil {
		sp.ErrorCode = errorCode(err)
		return
	}
	if code := checkLeaderEpoch(p, s.broker.NodeID(), rp.CurrentLeaderEpoch); code != 0 {
		sp.ErrorCode = code
		return
	}
	sp.LeaderEpoch, sp.EndOffset, err = p.EpochEnd(rp.LeaderEpoch)
	sp.ErrorCode = errorCode(err)
}
