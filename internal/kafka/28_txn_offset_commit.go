package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// TxnOffsetCommit (key 28), v0-v4: offsets committed inside a transaction.
// The group coordinator writes them to __consumer_offsets as part of the
// producer's transaction; they take effect only if it commits. v3+ carry
// the member's generation and id, checked as OffsetCommit's are.
//
// It needs WRITE on the transactional id (else every partition is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else
// GROUP_AUTHORIZATION_FAILED) and READ on each topic (else
// TOPIC_AUTHORIZATION_FAILED for its partitions, which are not committed).
func (s *Server) handleTxnOffsetCommit(r *request, req *kmsg.TxnOffsetCommitRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	gr := group.TxnCommitRequest{
		Group: req.Group, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Generation: -1,
	}
	if req.Version >= 3 {
		gr.Generation, gr.MemberID, gr.InstanceID = req.Generation, req.MemberID, req.InstanceID
	}
	var denied []error // per partition: why it is not committed
	deniedAll := s.txnCommitDenied(r, req)
	for _, t := range req.Topics {
		topicErr := deniedAll
		if topicErr == nil && !s.allowed(r, opRead, resTopic, t.Topic) {
			topicErr = errTopicDenied
		}
		for _, p := range t.Partitions {
			denied = append(denied, topicErr)
			if topicErr != nil {
				continue
			}
			o := group.OffsetCommit{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
			if req.Version >= 2 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			gr.Offsets = append(gr.Offsets, o)
		}
	}
	var results []error
	if groups, err := s.coordinator(); err != nil {
		results = make([]error, len(gr.Offsets))
		for i := range results {
			results[i] = err
		}
	} else if len(gr.Offsets) > 0 {
		results = groups.TxnCommitOffsets(gr)
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			err := denied[i]
			if err == nil {
				err, results = results[0], results[1:]
			}
			rp.ErrorCode = txnErrorCode(err, req.Version, 3)
			rt.Partitions = append(rt.Partitions, rp)
			i++
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// txnCommitDenied is why none of a TxnOffsetCommit's offsets may be
// committed by r: its transactional id or its group, or nil.
func (s *Server) txnCommitDenied(r *request, req *kmsg.TxnOffsetCommitRequest) error {
	switch {
	case !s.allowed(r, opWrite, resTxnID, req.TransactionalID):
		return errTxnIDDenied
	case !s.allowed(r, opRead, resGroup, req.Group):
		return errGroupDenied
	}
	return nil
}
