package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// ConsumerGroupHeartbeat (key 68), v0-v1: the KIP-848 consumer protocol.
//
// The coordinator assigns partitions itself (server assignors "uniform"
// and "range") and reconciles each member towards its target, revoking
// before assigning. Null fields mean "unchanged"; a rebalance timeout of -1
// likewise. v1 clients choose their member id and may subscribe by regex;
// a v0 client joining without an id gets one. It needs READ on the group
// (else GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every topic it
// subscribes to by name (else TOPIC_AUTHORIZATION_FAILED), as in Kafka 4.

func (s *Server) handleConsumerGroupHeartbeat(r *request, req *kmsg.ConsumerGroupHeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	coord, err := s.groupCoordinator(r, opRead, req.Group)
	if err == nil {
		for _, topic := range req.SubscribedTopicNames {
			if !s.allowed(r, opDescribe, resTopic, topic) {
				err = errTopicDenied
				break
			}
		}
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp, nil
	}
	hr := group.ConsumerHeartbeatRequest{
		Group:                req.Group,
		MemberID:             req.MemberID,
		MemberEpoch:          req.MemberEpoch,
		InstanceID:           req.InstanceID,
		RackID:               req.RackID,
		ClientID:             r.header.clientID,
		ClientHost:           clientHost(r),
		RebalanceTimeout:     -1,
		SubscribedTopicNames: req.SubscribedTopicNames,
		SubscribedTopicRegex: req.SubscribedTopicRegex,
		ServerAssignor:       req.ServerAssignor,
	}
	if req.RebalanceTimeoutMillis >= 0 {
		hr.RebalanceTimeout = millis(req.RebalanceTimeoutMillis)
	}
	if req.Topics != nil {
		hr.Owned = make([]group.TopicPartitions, 0, len(req.Topics))
		for _, t := range req.Topics {
			hr.Owned = append(hr.Owned, group.TopicPartitions{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	res := coord.ConsumerGroupHeartbeat(hr)
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
	if res.Err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(res.Err), errorMessage(res.Err)
		return resp, nil
	}
	resp.MemberID = kmsg.StringPtr(res.MemberID)
	resp.MemberEpoch = res.MemberEpoch
	if res.HasAssignment {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, t := range res.Assignment {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = t.TopicID, t.Partitions
			a.Topics = append(a.Topics, at)
		}
		if a.Topics == nil {
			a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		}
		resp.Assignment = &a
	}
	return resp, nil
}
