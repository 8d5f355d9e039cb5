package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// DeleteRecords (key 21), v0-v2.
//
// Moves each partition's log start offset up to the given offset (-1: the
// high watermark) and answers the new low watermark. An offset below -1 or
// above the high watermark is OFFSET_OUT_OF_RANGE. TimeoutMillis is not
// needed: nothing waits on replicas. A topic needs DELETE (else
// TOPIC_AUTHORIZATION_FAILED).

func (s *Server) handleDeleteRecords(r *request, req *kmsg.DeleteRecordsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		var (
			t        *broker.Topic
			topicErr error = errTopicDenied
		)
		if s.allowed(r, opDelete, resTopic, rt.Topic) {
			t, topicErr = s.broker.Topic(rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			err := topicErr
			if err == nil {
				p, perr := t.Partition(rp.Partition)
				if perr != nil {
					err = perr
				} else {
					sp.LowWatermark, err = p.DeleteBefore(rp.Offset)
				}
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				sp.LowWatermark = -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
