package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// SyncGroup (key 14), v0-v5.
//
// The leader sends every member's assignment; each member's request waits
// until the leader's has been stored, then returns its own. v3+ carry the
// instance id; v5+ the protocol type and name, which must be the group's.

func (s *Server) handleSyncGroup(r *request, req *kmsg.SyncGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	coord, err := s.groupCoordinator(r, opRead, req.Group)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	sr := group.SyncRequest{
		Group:        req.Group,
		Generation:   req.Generation,
		MemberID:     req.MemberID,
		InstanceID:   req.InstanceID,
		ProtocolType: req.ProtocolType,
		Protocol:     req.Protocol,
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	start := time.Now()
	res := coord.SyncGroup(s.shutdownCtx, sr)
	r.waited = time.Since(start) // mostly waiting for the leader's assignment
	if res.Err != nil {
		resp.ErrorCode = errorCode(res.Err)
		return resp, nil
	}
	resp.ProtocolType = kmsg.StringPtr(res.ProtocolType)
	resp.Protocol = kmsg.StringPtr(res.Protocol)
	resp.MemberAssignment = res.Assignment
	return resp, nil
}
