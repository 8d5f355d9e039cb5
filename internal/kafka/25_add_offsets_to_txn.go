package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// AddOffsetsToTxn (key 25), v0-v3: a transactional producer is about to
// commit offsets for a group inside its transaction (TxnOffsetCommit); the
// group's partition of __consumer_offsets joins the transaction, so EndTxn
// decides those offsets too. It needs WRITE on the transactional id (else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group (else
// GROUP_AUTHORIZATION_FAILED).
func (s *Server) handleAddOffsetsToTxn(r *request, req *kmsg.AddOffsetsToTxnRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	txns, err := s.transactionsFor(r, req.TransactionalID)
	if err == nil && !s.allowed(r, opRead, resGroup, req.Group) {
		err = errGroupDenied
	}
	if err == nil {
		err = txns.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
	}
	if err != nil {
		resp.ErrorCode = txnErrorCode(err, req.Version, 2)
	}
	return resp, nil
}
