package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups (key 42), v0-v3: deletes empty groups with their committed
// offsets. A group with members is NON_EMPTY_GROUP, an unknown one
// GROUP_ID_NOT_FOUND; v3+ add the broker's message.

func (s *Server) handleDeleteGroups(req *kmsg.DeleteGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	coord, err := s.coordinator()
	var results []error
	if err == nil {
		results = coord.DeleteGroups(req.Groups)
	}
	for i, name := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = name
		e := err
		if e == nil {
			e = results[i]
		}
		g.ErrorCode, g.ErrorMessage = errorCode(e), errorMessage(e)
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
