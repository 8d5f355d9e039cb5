package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// Heartbeat (key 12), v0-v4: keeps a classic member's session alive;
// REBALANCE_IN_PROGRESS tells it to rejoin. v3+ carry the instance id.

func (s *Server) handleHeartbeat(r *request, req *kmsg.HeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	coord, err := s.groupCoordinator(r, opRead, req.Group)
	if err == nil {
		err = coord.Heartbeat(group.HeartbeatRequest{
			Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID,
		})
	}
	resp.ErrorCode = errorCode(err)
	return resp, nil
}
