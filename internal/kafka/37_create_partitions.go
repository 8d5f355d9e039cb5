package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions (key 37), v0-v3.
//
// Grows a topic to Count partitions (not more than it has: INVALID_PARTITIONS).
// A manual Assignment must list exactly the new partitions, each on this
// node alone (else INVALID_REPLICA_ASSIGNMENT). A topic named twice is
// INVALID_REQUEST. ValidateOnly checks without creating. A topic needs
// ALTER (else TOPIC_AUTHORIZATION_FAILED).

func (s *Server) handleCreatePartitions(r *request, req *kmsg.CreatePartitionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	counts := make(map[string]int)
	for _, rt := range req.Topics {
		counts[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case counts[rt.Topic] > 1:
			err = kafkaErrorf(kerr.InvalidRequest, "topic %q appears more than once in the request", rt.Topic)
		case !s.allowed(r, opAlter, resTopic, rt.Topic):
			err = errTopicDenied
		default:
			err = s.createPartitions(rt, req.ValidateOnly)
		}
		st.ErrorCode, st.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (s *Server) createPartitions(rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	t, err := s.broker.Topic(rt.Topic)
	if err != nil {
		return err
	}
	current := int32(len(t.Partitions()))
	if rt.Count <= current {
		return kafkaErrorf(kerr.InvalidPartitions, "topic %q has %d partitions; the new count %d must be larger",
			rt.Topic, current, rt.Count)
	}
	if rt.Assignment != nil {
		if int32(len(rt.Assignment)) != rt.Count-current {
			return kafkaErrorf(kerr.InvalidReplicaAssignment, "%d assignments for %d new partitions",
				len(rt.Assignment), rt.Count-current)
		}
		for i, a := range rt.Assignment {
			if len(a.Replicas) != 1 || a.Replicas[0] != s.broker.NodeID() {
				return kafkaErrorf(kerr.InvalidReplicaAssignment, "new partition %d: replicas %v; the only broker is %d",
					current+int32(i), a.Replicas, s.broker.NodeID())
			}
		}
	}
	return s.broker.CreatePartitions(rt.Topic, rt.Count, validateOnly)
}
