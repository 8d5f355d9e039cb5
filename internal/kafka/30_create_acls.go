package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/acl"
)

// CreateAcls (key 30), v0-v3.
//
// Adds bindings, durably (the metadata log), each answered on its own: a
// binding Kafka would refuse is INVALID_REQUEST with Kafka's message (an
// UNKNOWN or ANY element, an empty name, a CLUSTER resource not named
// kafka-cluster, a principal without a type), and so is one for delegation
// tokens or users, which Wharf does not have. A binding that exists
// already is a success. v0 bindings are literal. It needs ALTER on the
// cluster (else CLUSTER_AUTHORIZATION_FAILED).

func (s *Server) handleCreateACLs(r *request, req *kmsg.CreateACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	store, err := s.aclStore(r, opAlter)
	errs := make([]error, len(req.Creations))
	if err == nil {
		bindings := make([]acl.Binding, len(req.Creations))
		for i, c := range req.Creations {
			bindings[i] = acl.Binding{
				ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
				Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType,
			}
		}
		errs = store.Create(bindings)
	}
	for i := range req.Creations {
		e := err
		if e == nil {
			e = aclError(errs[i])
		}
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = errorCode(e), errorMessage(e)
		resp.Results = append(resp.Results, res)
	}
	if err == nil {
		r.conn.log.Info("ACLs created", "principal", r.principal, "count", len(req.Creations))
	}
	return resp, nil
}
