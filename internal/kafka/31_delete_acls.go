package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/acl"
)

// DeleteAcls (key 31), v0-v3.
//
// Deletes, durably, the bindings each filter matches and lists them per
// filter (v0 filters match literal patterns only). A filter with an
// UNKNOWN element is INVALID_REQUEST and deletes nothing. It needs ALTER
// on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

func (s *Server) handleDeleteACLs(r *request, req *kmsg.DeleteACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	store, err := s.aclStore(r, opAlter)
	var (
		deleted [][]acl.Binding
		errs    []error
	)
	if err == nil {
		filters := make([]acl.Filter, len(req.Filters))
		for i, f := range req.Filters {
			filters[i] = acl.Filter{
				ResourceType: f.ResourceType, ResourceName: f.ResourceName, PatternType: f.ResourcePatternType,
				Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType,
			}
		}
		deleted, errs = store.Delete(filters)
	}
	total := 0
	for i := range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		e := err
		if e == nil {
			e = aclError(errs[i])
		}
		res.ErrorCode, res.ErrorMessage = errorCode(e), errorMessage(e)
		if e == nil {
			for _, b := range deleted[i] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
			total += len(deleted[i])
		}
		resp.Results = append(resp.Results, res)
	}
	if total > 0 {
		r.conn.log.Info("ACLs deleted", "principal", r.principal, "count", total)
	}
	return resp, nil
}
