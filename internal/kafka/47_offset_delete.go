package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// OffsetDelete (key 47), v0: deletes committed offsets of topics the
// group does not consume (GROUP_SUBSCRIBED_TO_TOPIC otherwise). It needs
// DELETE on the group (else GROUP_AUTHORIZATION_FAILED) and READ on each
// topic (else TOPIC_AUTHORIZATION_FAILED, and its offsets stay).

func (s *Server) handleOffsetDelete(r *request, req *kmsg.OffsetDeleteRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	coord, err := s.groupCoordinator(r, opDelete, req.Group)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	var tps []group.TopicPartition
	readable := make([]bool, len(req.Topics))
	for i, t := range req.Topics {
		if readable[i] = s.allowed(r, opRead, resTopic, t.Topic); !readable[i] {
			continue
		}
		for _, p := range t.Partitions {
			tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	results, err := coord.DeleteOffsets(req.Group, tps)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			if readable[i] {
				rp.ErrorCode = errorCode(results[0])
				results = results[1:]
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
