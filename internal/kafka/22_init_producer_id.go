package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId (key 22), v0-v5.
//
// An idempotent producer (no transactional id) gets a producer id never
// handed out before, at epoch 0; the partitions then deduplicate its
// retried batches by sequence number. A producer re-initialising after
// UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER (KIP-360, v3+) also
// gets a fresh id, as Kafka gives a non-transactional producer.
//
// Transactional ids need the transaction coordinator, which Wharf does not
// have yet: such a request is refused rather than given an id whose
// transactions would not be honoured.
func (s *Server) handleInitProducerID(req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		s.log.Info("refusing InitProducerId for a transactional id: transactions are not supported yet",
			"transactional_id", *req.TransactionalID)
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
