package kafka

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions (key 65), v0: the state, producer, timeout and
// partitions of transactional ids, for tools (kafka-transactions.sh,
// kadm). An unknown id is TRANSACTIONAL_ID_NOT_FOUND, one whose partition
// of __transaction_state is unavailable COORDINATOR_NOT_AVAILABLE. An id
// needs DESCRIBE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); topics the
// principal may not DESCRIBE are left out of its partitions, as in Kafka.
func (s *Server) handleDescribeTransactions(r *request, req *kmsg.DescribeTransactionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	txns, err := s.transactions()
	for i, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.StartTimestamp, st.ProducerID, st.ProducerEpoch = -1, -1, -1
		idErr := err
		if idErr == nil && !s.allowed(r, opDescribe, resTxnID, id) {
			idErr = errTxnIDDenied
		}
		if idErr == nil {
			idErr = txns.Available(id)
		}
		if idErr != nil {
			st.ErrorCode = errorCode(idErr)
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		d := txns.Describe(req.TransactionalIDs[i : i+1])[0]
		if d == nil {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State = d.State
		st.TimeoutMillis = int32(d.Timeout.Milliseconds())
		if !d.Started.IsZero() {
			st.StartTimestamp = d.Started.UnixMilli()
		}
		st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
		for _, topic := range slices.Sorted(maps.Keys(d.Partitions)) {
			if !s.mayDo(r, opDescribe, resTopic, topic) {
				continue
			}
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic, t.Partitions = topic, d.Partitions[topic]
			st.Topics = append(st.Topics, t)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
