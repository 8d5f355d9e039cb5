package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/acl"
)

// DescribeAcls (key 29), v0-v3.
//
// Lists the bindings the filter matches, grouped by resource pattern
// (v0 filters match literal patterns only). It needs DESCRIBE on the
// cluster (else CLUSTER_AUTHORIZATION_FAILED). Without an authorizer the
// ACL APIs answer SECURITY_DISABLED, as Kafka does; a filter with an
// UNKNOWN element is INVALID_REQUEST.

// errSecurityDisabled answers the ACL APIs without --kafka-authorizer.
var errSecurityDisabled = kafkaErrorf(kerr.SecurityDisabled, "No Authorizer is configured on the broker")

// aclStore is the authorizer's bindings, or why the ACL APIs cannot
// serve r: no authorizer, or r may not do op on the cluster.
func (s *Server) aclStore(r *request, op kmsg.ACLOperation) (*acl.Store, error) {
	if s.cfg.Authorizer == nil {
		return nil, errSecurityDisabled
	}
	if !s.allowedCluster(r, op) {
		return nil, errClusterDenied
	}
	return s.cfg.Authorizer.Store(), nil
}

// aclError is the Kafka error for a refused binding or filter.
func aclError(err error) error {
	if errors.Is(err, acl.ErrInvalid) {
		return kafkaErrorf(kerr.InvalidRequest, "%s", err.Error())
	}
	return err
}

func (s *Server) handleDescribeACLs(r *request, req *kmsg.DescribeACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	store, err := s.aclStore(r, opDescribe)
	var bindings []acl.Binding
	if err == nil {
		bindings, err = store.Describe(acl.Filter{
			ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
			Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType,
		})
	}
	if err != nil {
		err = aclError(err)
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp, nil
	}
	type pattern struct {
		typ  kmsg.ACLResourceType
		name string
		pt   kmsg.ACLResourcePatternType
	}
	at := map[pattern]int{}
	for _, b := range bindings {
		key := pattern{b.ResourceType, b.ResourceName, b.PatternType}
		i, ok := at[key]
		if !ok {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			i = len(resp.Resources)
			at[key] = i
			resp.Resources = append(resp.Resources, res)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp, nil
}
