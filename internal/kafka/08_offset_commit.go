package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// OffsetCommit (key 8), v0-v10.
//
// v0 commits carry no generation or member: they are admin commits, as are
// later ones with generation -1 and no member id (accepted only while the
// group is empty). v1's per-partition timestamp and v2-v4's retention time
// are ignored, as Kafka does since offsets expire only with their group.
// v6+ carry the leader epoch, v7+ the instance id; for KIP-848 groups the
// generation is the member epoch. v10 names topics by id. It needs READ on
// the group (else every partition is GROUP_AUTHORIZATION_FAILED) and on
// each topic (else TOPIC_AUTHORIZATION_FAILED).

func (s *Server) handleOffsetCommit(r *request, req *kmsg.OffsetCommitRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	cr := group.CommitRequest{Group: req.Group, Generation: -1}
	if req.Version >= 1 {
		cr.Generation, cr.MemberID = req.Generation, req.MemberID
	}
	if req.Version >= 7 {
		cr.InstanceID = req.InstanceID
	}
	// Lay the answer out first; each partition's code is filled in below.
	type slot struct{ topic, partition int }
	var slots []slot
	var pre []error // an error known before the coordinator is asked
	for ti, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name, nameErr := rt.Topic, error(nil)
		if req.Version >= 10 {
			name, nameErr = s.topicNameByID(rt.TopicID)
		}
		if nameErr == nil && !s.allowed(r, opRead, resTopic, name) {
			nameErr = errTopicDenied
		}
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
			oc := group.OffsetCommit{Topic: name, Partition: rp.Partition, Offset: rp.Offset, LeaderEpoch: -1}
			if req.Version >= 6 {
				oc.LeaderEpoch = rp.LeaderEpoch
			}
			if rp.Metadata != nil {
				oc.Metadata = *rp.Metadata
			}
			cr.Offsets = append(cr.Offsets, oc)
			slots = append(slots, slot{ti, pi})
			pre = append(pre, nameErr)
		}
		resp.Topics = append(resp.Topics, st)
	}
	coord, err := s.coordinator()
	if err == nil && !s.allowed(r, opRead, resGroup, req.Group) {
		err = errGroupDenied
	}
	var results []error
	if err == nil {
		// Partitions of unknown or forbidden topics never reach the
		// coordinator.
		var ask group.CommitRequest = cr
		ask.Offsets = nil
		var asked []int
		for i, oc := range cr.Offsets {
			if pre[i] == nil {
				ask.Offsets = append(ask.Offsets, oc)
				asked = append(asked, i)
			}
		}
		results = make([]error, len(cr.Offsets))
		copy(results, pre)
		for j, e := range coord.CommitOffsets(ask) {
			results[asked[j]] = e
		}
	}
	for i, sl := range slots {
		e := err
		if e == nil {
			e = results[i]
		}
		resp.Topics[sl.topic].Partitions[sl.partition].ErrorCode = errorCode(e)
	}
	return resp, nil
}

// topicNameByID resolves a topic id (v10 commits and fetches).
func (s *Server) topicNameByID(id [16]byte) (string, error) {
	t, err := s.broker.TopicByID(id)
	if err != nil {
		return "", kafkaErrorf(kerr.UnknownTopicID, "no topic has id %x", id)
	}
	return t.Name(), nil
}
