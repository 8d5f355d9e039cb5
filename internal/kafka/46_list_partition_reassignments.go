package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListPartitionReassignments (key 46), v0.
//
// No reassignment is ever in progress on a single node (see
// AlterPartitionReassignments), so the list is empty, whatever is asked.
// It needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

func (s *Server) handleListPartitionReassignments(r *request, req *kmsg.ListPartitionReassignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !s.allowedCluster(r, opDescribe) {
		resp.ErrorCode, resp.ErrorMessage = errorCode(errClusterDenied), errorMessage(errClusterDenied)
	}
	return resp, nil
}
