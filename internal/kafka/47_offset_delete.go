package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// OffsetDelete (key 47), v0: deletes committed offsets of topics the
// group does not consume (GROUP_SUBSCRIBED_TO_TOPIC otherwise).

func (s *Server) handleOffsetDelete(req *kmsg.OffsetDeleteRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	coord, err := s.coordinator()
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	var tps []group.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	results, err := coord.DeleteOffsets(req.Group, tps)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, errorCode(results[i])
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
