package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator (key 10), v0-v6.
//
// On a single node every group and transactional id is coordinated by
// this node; in a cluster, by the leader of the key's partition of
// __consumer_offsets or __transaction_state, as in Kafka, wherever the
// request lands (every node knows every leader). v0-v3 ask for one key,
// v4+ for a batch. Share groups (type 2) and unknown types are
// INVALID_REQUEST. A key whose partition is offline or could not be read,
// or has no leader, is COORDINATOR_NOT_AVAILABLE, as Kafka answers while
// no broker has that partition loaded. A group key needs DESCRIBE on the
// group (else GROUP_AUTHORIZATION_FAILED), a transactional id DESCRIBE on
// it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

const (
	coordinatorTypeGroup       = 0
	coordinatorTypeTransaction = 1
)

func (s *Server) handleFindCoordinator(r *request, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		b, err := s.coordinatorFor(r, req.CoordinatorType, key)
		if err != nil {
			c.NodeID, c.Port = -1, -1
			c.ErrorCode, c.ErrorMessage = errorCode(err), errorMessage(err)
		} else {
			c.NodeID, c.Host, c.Port = b.NodeID, b.Host, b.Port
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
	}
	return resp, nil
}

// coordinatorFor is the broker coordinating a key, as r's listener shows
// brokers, if r's principal may know.
func (s *Server) coordinatorFor(r *request, keyType int8, key string) (kmsg.MetadataResponseBroker, error) {
	var (
		node int32
		err  error
	)
	self := s.broker.NodeID()
	switch keyType {
	case coordinatorTypeGroup:
		if !s.allowed(r, opDescribe, resGroup, key) {
			return kmsg.MetadataResponseBroker{}, errGroupDenied
		}
		groups, gerr := s.coordinator()
		if gerr != nil {
			return kmsg.MetadataResponseBroker{}, gerr
		}
		node, err = groups.CoordinatorNode(key, self)
	case coordinatorTypeTransaction:
		if !s.allowed(r, opDescribe, resTxnID, key) {
			return kmsg.MetadataResponseBroker{}, errTxnIDDenied
		}
		txns, terr := s.transactions()
		if terr != nil {
			return kmsg.MetadataResponseBroker{}, terr
		}
		node, err = txns.CoordinatorNode(key, self)
	default:
		return kmsg.MetadataResponseBroker{}, kafkaErrorf(kerr.InvalidRequest, "unsupported coordinator type %d", keyType)
	}
	if err != nil {
		return kmsg.MetadataResponseBroker{}, err
	}
	for _, b := range s.metadataBrokers(r.conn.listener) {
		if b.NodeID == node {
			return b, nil
		}
	}
	return kmsg.MetadataResponseBroker{}, kafkaErrorf(kerr.CoordinatorNotAvailable, "node %d, the coordinator, has not registered its address", node)
}
