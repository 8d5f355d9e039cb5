package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// EndTxn (key 26), v0-v4: commit or abort the producer's transaction. The
// coordinator records the decision, writes a COMMIT or ABORT marker to
// every partition of the transaction (and applies or drops the offsets
// committed in it), then answers. v5 (KIP-890 part 2, an epoch bump per
// transaction) is not served: Wharf does not advertise
// transaction.version 2, and clients then stay on v4. It needs WRITE on
// the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
func (s *Server) handleEndTxn(r *request, req *kmsg.EndTxnRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	txns, err := s.transactionsFor(r, req.TransactionalID)
	if err == nil {
		err = txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
	}
	if err != nil {
		resp.ErrorCode = txnErrorCode(err, req.Version, 2)
	}
	return resp, nil
}
