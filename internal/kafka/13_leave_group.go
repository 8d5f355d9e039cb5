package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// LeaveGroup (key 13), v0-v5.
//
// v0-v2 name one member; v3+ (KIP-345) a batch, each by member id and/or
// instance id, with an error per member.

func (s *Server) handleLeaveGroup(r *request, req *kmsg.LeaveGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	coord, err := s.groupCoordinator(r, opRead, req.Group)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	var members []group.LeavingMember
	if req.Version < 3 {
		members = []group.LeavingMember{{MemberID: req.MemberID}}
	}
	for _, m := range req.Members {
		members = append(members, group.LeavingMember{MemberID: m.MemberID, InstanceID: m.InstanceID})
	}
	results, err := coord.LeaveGroup(req.Group, members)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	if req.Version < 3 {
		resp.ErrorCode = errorCode(results[0])
		return resp, nil
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, errorCode(results[i])
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
