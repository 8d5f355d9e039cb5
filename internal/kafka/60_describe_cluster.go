package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/acl"
)

// DescribeCluster (key 60), v0-v2.
//
// Describes the brokers: this one, which is also the controller, on a
// single node; every registered broker and the metadata group's leader as
// the controller in a cluster. v1+ may ask for
// controllers (EndpointType 2): as on a Kafka broker (not a controller
// listener), that is MISMATCHED_ENDPOINT_TYPE; an unknown type is
// UNSUPPORTED_ENDPOINT_TYPE. Nothing is ever fenced (v2). It needs no
// permission, as in Kafka; the cluster's authorized operations are the
// principal's.

const (
	endpointTypeBrokers     = 1
	endpointTypeControllers = 2
)

func (s *Server) handleDescribeCluster(r *request, req *kmsg.DescribeClusterRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != endpointTypeBrokers {
		var err error
		if req.EndpointType == endpointTypeControllers {
			err = kafkaErrorf(kerr.MismatchedEndpointType, "the broker listener cannot describe controllers")
		} else {
			err = kafkaErrorf(kerr.UnsupportedEndpointType, "unknown endpoint type %d", req.EndpointType)
		}
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp, nil
	}
	resp.ClusterID = s.broker.ClusterID()
	resp.ControllerID = s.broker.Controller()
	for _, mb := range s.metadataBrokers(r.conn.listener) {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = mb.NodeID, mb.Host, mb.Port
		resp.Brokers = append(resp.Brokers, b)
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = s.authorizedOperations(r, kmsg.ACLResourceTypeCluster, acl.ClusterName, clusterOperations)
	}
	return resp, nil
}
