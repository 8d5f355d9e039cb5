package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/txn"
)

// AddPartitionsToTxn (key 24), v0-v3: a transactional producer names the
// partitions it is about to write to, before its first batch to each, so
// that EndTxn can write markers to them. If one partition is bad none is
// added: it gets its error and the others OPERATION_NOT_ATTEMPTED, as in
// Kafka. v4+ (brokers verifying partitions for each other, KIP-890) is not
// served: Wharf's nodes ask each other over the cluster's transport
// (internal/txn/verify.go). It needs WRITE on the transactional id (else every partition is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (else
// TOPIC_AUTHORIZATION_FAILED, and the others OPERATION_NOT_ATTEMPTED).
func (s *Server) handleAddPartitionsToTxn(r *request, req *kmsg.AddPartitionsToTxnRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	var parts []txn.TopicPartition
	var denied []bool // per partition
	anyDenied := false
	for _, t := range req.Topics {
		ok := s.allowed(r, opWrite, resTopic, t.Topic)
		anyDenied = anyDenied || !ok
		for _, p := range t.Partitions {
			parts = append(parts, txn.TopicPartition{Topic: t.Topic, Partition: p})
			denied = append(denied, !ok)
		}
	}
	answer := func(code func(i int) int16) {
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code(i)
				rt.Partitions = append(rt.Partitions, rp)
				i++
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	txns, err := s.transactionsFor(r, req.TransactionalID)
	if err == nil && anyDenied {
		answer(func(i int) int16 {
			if denied[i] {
				return kerr.TopicAuthorizationFailed.Code
			}
			return kerr.OperationNotAttempted.Code
		})
		return resp, nil
	}
	if err == nil {
		var results []error
		results, err = txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts)
		if err == nil {
			failed := false
			for _, r := range results {
				failed = failed || r != nil
			}
			answer(func(i int) int16 {
				switch {
				case results[i] != nil:
					return errorCode(results[i])
				case failed:
					return kerr.OperationNotAttempted.Code
				}
				return 0
			})
			return resp, nil
		}
	}
	code := txnErrorCode(err, req.Version, 2)
	answer(func(int) int16 { return code })
	return resp, nil
}
