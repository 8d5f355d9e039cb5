package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// TxnOffsetCommit (key 28), v0-v4: offsets committed inside a transaction.
// The group coordinator writes them to __consumer_offsets as part of the
// producer's transaction; they take effect only if it commits. v3+ carry
// the member's generation and id, checked as OffsetCommit's are.
func (s *Server) handleTxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	gr := group.TxnCommitRequest{
		Group: req.Group, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Generation: -1,
	}
	if req.Version >= 3 {
		gr.Generation, gr.MemberID, gr.InstanceID = req.Generation, req.MemberID, req.InstanceID
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
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
	} else {
		results = groups.TxnCommitOffsets(gr)
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = txnErrorCode(results[i], req.Version, 3)
			rt.Partitions = append(rt.Partitions, rp)
			i++
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
