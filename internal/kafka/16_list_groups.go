package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/acl"
)

// ListGroups (key 16), v0-v5: every group, filtered by state (v4+) and by
// type, "classic" or "consumer" (v5+). Without DESCRIBE on the cluster,
// only the groups the principal may DESCRIBE are listed, as in Kafka.

func (s *Server) handleListGroups(r *request, req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	coord, err := s.coordinator()
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	all := s.mayDo(r, opDescribe, kmsg.ACLResourceTypeCluster, acl.ClusterName)
	for _, g := range coord.ListGroups(req.StatesFilter, req.TypesFilter) {
		if !all && !s.mayDo(r, opDescribe, resGroup, g.Group) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Group, g.ProtocolType, g.State, g.Type
		resp.Groups = append(resp.Groups, lg)
	}
	return resp, nil
}
