package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// DescribeGroups (key 15), v0-v6.
//
// A group that does not exist is described as "Dead" with no members; v6+
// also answer GROUP_ID_NOT_FOUND. Members' metadata and assignments are
// shown only for a stable group, as Kafka does. KIP-848 groups are shown
// in the classic shape (see group.Coordinator.DescribeGroups). A group
// needs DESCRIBE (else GROUP_AUTHORIZATION_FAILED); v3+ report what the
// principal may do with it.

func (s *Server) handleDescribeGroups(r *request, req *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	coord, err := s.coordinator()
	var described []group.DescribedGroup
	if err == nil {
		described = coord.DescribeGroups(req.Groups)
	}
	for i, name := range req.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
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
			g.ErrorCode = errorCode(err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d := described[i]
		g.State, g.ProtocolType, g.Protocol = d.State, d.ProtocolType, d.Protocol
		if d.Err != nil && (req.Version >= 6 || !errors.Is(d.Err, group.ErrGroupIDNotFound)) {
			g.ErrorCode, g.ErrorMessage = errorCode(d.Err), errorMessage(d.Err)
		}
		for _, m := range d.Members {
			gm := kmsg.NewDescribeGroupsResponseGroupMember()
			gm.MemberID, gm.InstanceID, gm.ClientID, gm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
			gm.ProtocolMetadata, gm.MemberAssignment = m.Metadata, m.Assignment
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
