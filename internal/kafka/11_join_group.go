package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// JoinGroup (key 11), v0-v9.
//
// The request waits until the group's rebalance completes (or Shutdown
// starts). v0 has no rebalance timeout: it is the session timeout. v4+
// dynamic members first get a member id with MEMBER_ID_REQUIRED (KIP-394);
// v5+ carry group.instance.id (KIP-345); v9 tells a static leader that
// rejoined a stable group to keep the current assignment (SkipAssignment).
// It needs READ on the group (else GROUP_AUTHORIZATION_FAILED), as do
// SyncGroup, Heartbeat and LeaveGroup.

func (s *Server) handleJoinGroup(r *request, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	resp.MemberID = req.MemberID
	coord, err := s.groupCoordinator(r, opRead, req.Group)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	jr := group.JoinRequest{
		Group:                req.Group,
		MemberID:             req.MemberID,
		InstanceID:           req.InstanceID,
		ClientID:             r.header.clientID,
		ClientHost:           clientHost(r),
		SessionTimeout:       millis(req.SessionTimeoutMillis),
		RebalanceTimeout:     millis(req.RebalanceTimeoutMillis),
		ProtocolType:         req.ProtocolType,
		RequireKnownMemberID: req.Version >= 4,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	start := time.Now()
	res := coord.JoinGroup(s.shutdownCtx, jr)
	r.waited = time.Since(start) // mostly waiting for the rebalance
	resp.MemberID = res.MemberID
	if res.Err != nil {
		resp.ErrorCode = errorCode(res.Err)
		return resp, nil
	}
	resp.Generation = res.Generation
	resp.ProtocolType = kmsg.StringPtr(res.ProtocolType)
	resp.Protocol = kmsg.StringPtr(res.Protocol)
	resp.LeaderID = res.Leader
	resp.SkipAssignment = res.SkipAssignment
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, m.InstanceID, m.Metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
