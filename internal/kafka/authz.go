package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/acl"
)

// Authorization: with Config.Authorizer set (--kafka-authorizer), every
// API checks the operations Kafka's request handler checks, as each
// handler's comment says, and answers with Kafka's *_AUTHORIZATION_FAILED
// codes; without it everything is allowed, as on a Kafka broker without
// an authorizer. The principal is the one the connection had when the
// request was read, the host its peer's IP address.

// allowed reports whether r's principal may do op on the resource; a
// denial is logged, as Kafka's authorizer log does.
func (s *Server) allowed(r *request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if s.mayDo(r, op, rt, name) {
		return true
	}
	r.conn.log.Info("authorization denied", "principal", r.principal, "operation", op.String(),
		"resource_type", rt.String(), "resource", name, "api", kmsg.NameForKey(r.header.key))
	return false
}

// mayDo is allowed without the log line, for listings that leave out
// what the principal may not see (Metadata of all topics, ListGroups).
func (s *Server) mayDo(r *request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	a := s.cfg.Authorizer
	return a == nil || a.Authorize(r.principal, r.conn.remoteIP, op, rt, name)
}

// allowedCluster is allowed on the cluster resource.
func (s *Server) allowedCluster(r *request, op kmsg.ACLOperation) bool {
	return s.allowed(r, op, kmsg.ACLResourceTypeCluster, acl.ClusterName)
}

// Short names for what the handlers check.
const (
	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite

	resTopic = kmsg.ACLResourceTypeTopic
	resGroup = kmsg.ACLResourceTypeGroup
	resTxnID = kmsg.ACLResourceTypeTransactionalId
)

// The errors a denial answers with.
var (
	errTopicDenied   = kafkaErrorf(kerr.TopicAuthorizationFailed, "Topic authorization failed.")
	errGroupDenied   = kafkaErrorf(kerr.GroupAuthorizationFailed, "Group authorization failed.")
	errTxnIDDenied   = kafkaErrorf(kerr.TransactionalIDAuthorizationFailed, "Transactional Id authorization failed.")
	errClusterDenied = kafkaErrorf(kerr.ClusterAuthorizationFailed, "Cluster authorization failed.")
)

// Every operation a resource type has, for the KIP-430 authorized
// operations fields.
var (
	topicOperations = []kmsg.ACLOperation{opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs}
	groupOperations = []kmsg.ACLOperation{opRead, opDelete, opDescribe}
	// clusterOperations as Kafka 4 lists them for the cluster.
	clusterOperations = []kmsg.ACLOperation{opCreate, opAlter, opDescribe, kmsg.ACLOperationClusterAction,
		opDescribeConfigs, opAlterConfigs, opIdempotentWrite}
)

// authorizedOperations is the KIP-430 bitfield for a resource: every
// operation of the type without an authorizer, else those r may do.
func (s *Server) authorizedOperations(r *request, rt kmsg.ACLResourceType, name string, ops []kmsg.ACLOperation) int32 {
	if a := s.cfg.Authorizer; a != nil {
		return a.AuthorizedOperations(r.principal, r.conn.remoteIP, rt, name, ops)
	}
	var bits int32
	for _, op := range ops {
		bits |= 1 << op
	}
	return bits
}
