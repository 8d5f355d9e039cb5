package kafka

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// UnregisterBroker (key 64), v0.
//
// Removes a node from the cluster (broker.RemoveNode): KRaft's
// `kafka-cluster.sh unregister`. Wharf refuses it, INVALID_REQUEST with
// the partitions named, while the node still holds partition replicas:
// they move first (AlterPartitionReassignments; `wharf cluster
// remove-node` does both). The node's quorum queue replicas are shrunk
// away first, here too; INVALID_REQUEST, the queues named, if the node is
// the only member of some, or they do not leave it in time. It answers
// once the metadata group no longer counts the node,
// which may then be stopped. An id that is no node of the cluster, or any id on a single
// node, is BROKER_ID_NOT_REGISTERED. It needs ALTER on the cluster (else
// CLUSTER_AUTHORIZATION_FAILED).

func (s *Server) handleUnregisterBroker(r *request, req *kmsg.UnregisterBrokerRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	if !s.allowedCluster(r, opAlter) {
		resp.ErrorCode, resp.ErrorMessage = errorCode(errClusterDenied), errorMessage(errClusterDenied)
		return resp, nil
	}
	err := s.broker.RemoveNode(req.BrokerID)
	switch {
	case errors.Is(err, broker.ErrUnknownNode):
		err = kafkaErrorf(kerr.BrokerIDNotRegistered, "%s", strings.TrimPrefix(err.Error(), broker.ErrUnknownNode.Error()+": "))
	case errors.Is(err, broker.ErrNodeHoldsReplicas):
		err = kafkaErrorf(kerr.InvalidRequest, "%s", strings.TrimPrefix(err.Error(), broker.ErrNodeHoldsReplicas.Error()+": "))
	}
	resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
	return resp, nil
}
