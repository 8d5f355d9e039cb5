package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/acl"
)

// InitProducerId (key 22), v0-v5.
//
// An idempotent producer (no transactional id) gets a producer id never
// handed out before, at epoch 0; the partitions then deduplicate its
// retried batches by sequence number. A producer re-initialising after
// UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER (KIP-360, v3+) also
// gets a fresh id, as Kafka gives a non-transactional producer.
//
// A transactional id goes to the transaction coordinator, which keeps one
// producer id per transactional id and bumps its epoch on every
// initialisation, fencing older producers of the id and aborting what they
// left open. v3+ producers re-initialising (KIP-360) send their current id
// and epoch, which must still be the id's. PRODUCER_FENCED is answered
// from v4 (KIP-588), INVALID_PRODUCER_EPOCH before.
//
// A transactional producer needs WRITE on its id (else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent one
// IDEMPOTENT_WRITE on the cluster or WRITE on some topic (else
// CLUSTER_AUTHORIZATION_FAILED), as in Kafka.
func (s *Server) handleInitProducerID(r *request, req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		txns, err := s.transactionsFor(r, *req.TransactionalID)
		if err != nil {
			resp.ErrorCode = errorCode(err)
			return resp, nil
		}
		pid, epoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			pid, epoch = req.ProducerID, req.ProducerEpoch
		}
		timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
		res, err := txns.InitProducerID(*req.TransactionalID, timeout, pid, epoch)
		if err != nil {
			resp.ErrorCode = txnErrorCode(err, req.Version, 4)
			return resp, nil
		}
		resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.Epoch
		return resp, nil
	}
	if !s.mayWriteIdempotently(r) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	id, err := s.broker.AllocateProducerID()
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

// mayWriteIdempotently: IDEMPOTENT_WRITE on the cluster, or WRITE on at
// least one topic (KIP-679).
func (s *Server) mayWriteIdempotently(r *request) bool {
	a := s.cfg.Authorizer
	if a == nil || a.Authorize(r.principal, r.conn.remoteIP, opIdempotentWrite, kmsg.ACLResourceTypeCluster, acl.ClusterName) ||
		a.AuthorizeAny(r.principal, r.conn.remoteIP, opWrite, resTopic) {
		return true
	}
	r.conn.log.Info("authorization denied", "principal", r.principal, "operation", "IDEMPOTENT_WRITE",
		"resource_type", "CLUSTER", "resource", acl.ClusterName, "api", "InitProducerID")
	return false
}
