package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator (key 10), v0-v6.
//
// Every group is coordinated by this node. v0-v3 ask for one key, v4+ for
// a batch. Transactional ids (key type 1) are coordinated by this node too
// (internal/txn). Share groups (type 2) and unknown types are
// INVALID_REQUEST. A key whose partition of __consumer_offsets or
// __transaction_state is offline or could not be read is
// COORDINATOR_NOT_AVAILABLE, as Kafka answers while no broker has that
// partition loaded. A group key needs DESCRIBE on the group (else
// GROUP_AUTHORIZATION_FAILED), a transactional id DESCRIBE on it (else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

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
		if err := s.coordinatorFor(r, req.CoordinatorType, key); err != nil {
			c.NodeID, c.Port = -1, -1
			c.ErrorCode, c.ErrorMessage = errorCode(err), errorMessage(err)
		} else {
			b := s.metadataBroker(r.conn.listener)
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

// coordinatorFor reports whether this node can coordinate a key now for
// r's principal.
func (s *Server) coordinatorFor(r *request, keyType int8, key string) error {
	switch keyType {
	case coordinatorTypeGroup:
		if !s.allowed(r, opDescribe, resGroup, key) {
			return errGroupDenied
		}
		groups, err := s.coordinator()
		if err != nil {
			return err
		}
		return groups.Available(key)
	case coordinatorTypeTransaction:
		if !s.allowed(r, opDescribe, resTxnID, key) {
			return errTxnIDDenied
		}
		txns, err := s.transactions()
		if err != nil {
			return err
		}
		return txns.Available(key)
	}
	return kafkaErrorf(kerr.InvalidRequest, "unsupported coordinator type %d", keyType)
}
