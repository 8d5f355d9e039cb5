package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups (key 16), v0-v5: every group, filtered by state (v4+) and by
// type, "classic" or "consumer" (v5+).

func (s *Server) handleListGroups(req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	coord, err := s.coordinator()
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	for _, g := range coord.ListGroups(req.StatesFilter, req.TypesFilter) {
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Group, g.ProtocolType, g.State, g.Type
		resp.Groups = append(resp.Groups, lg)
	}
	return resp, nil
}
