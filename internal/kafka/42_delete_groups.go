package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups (key 42), v0-v3: deletes empty groups with their committed
// offsets. A group with members is NON_EMPTY_GROUP, an unknown one
// GROUP_ID_NOT_FOUND; v3+ add the broker's message. A group needs DELETE
// (else GROUP_AUTHORIZATION_FAILED, and it stays).

func (s *Server) handleDeleteGroups(r *request, req *kmsg.DeleteGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	coord, err := s.coordinator()
	results := make(map[string]error, len(req.Groups))
	if err == nil {
		var allowed []string
		for _, name := range req.Groups {
			if s.allowed(r, opDelete, resGroup, name) {
				allowed = append(allowed, name)
			} else {
				results[name] = errGroupDenied
			}
		}
		for i, e := range coord.DeleteGroups(allowed) {
			results[allowed[i]] = e
		}
	}
	for _, name := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = name
		e := err
		if e == nil {
			e = results[name]
		}
		g.ErrorCode, g.ErrorMessage = errorCode(e), errorMessage(e)
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
