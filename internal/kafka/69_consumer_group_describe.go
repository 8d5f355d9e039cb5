package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// ConsumerGroupDescribe (key 69), v0-v1: KIP-848 groups with each member's
// current and target assignment. A classic group is GROUP_ID_NOT_FOUND.
// v1 adds the member type: every member here is a consumer (1). A group
// needs DESCRIBE (else GROUP_AUTHORIZATION_FAILED).

func (s *Server) handleConsumerGroupDescribe(r *request, req *kmsg.ConsumerGroupDescribeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	coord, err := s.coordinator()
	var described []group.ConsumerGroupDescription
	if err == nil {
		described = coord.DescribeConsumerGroups(req.Groups)
	}
	for i, name := range req.Groups {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group = name
		if !s.allowed(r, opDescribe, resGroup, name) {
			g.ErrorCode, g.ErrorMessage = errorCode(errGroupDenied), errorMessage(errGroupDenied)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = s.authorizedOperations(r, resGroup, name, groupOperations)
		}
		if err != nil {
			g.ErrorCode, g.ErrorMessage = errorCode(err), errorMessage(err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d := described[i]
		if d.Err != nil {
			g.ErrorCode, g.ErrorMessage = errorCode(d.Err), errorMessage(d.Err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			gm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			gm.MemberID, gm.InstanceID, gm.RackID, gm.MemberEpoch = m.MemberID, m.InstanceID, m.RackID, m.MemberEpoch
			gm.ClientID, gm.ClientHost = m.ClientID, m.ClientHost
			gm.SubscribedTopics, gm.SubscribedTopicRegex = m.SubscribedTopics, m.SubscribedRegex
			gm.Assignment, gm.TargetAssignment = kmsgAssignment(m.Assignment), kmsgAssignment(m.TargetAssignment)
			gm.MemberType = 1
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func kmsgAssignment(ts []group.AssignedTopic) kmsg.Assignment {
	a := kmsg.NewAssignment()
	for _, t := range ts {
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic, tp.Partitions = t.TopicID, t.Topic, t.Partitions
		a.TopicPartitions = append(a.TopicPartitions, tp)
	}
	return a
}
