package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// OffsetFetch (key 9), v0-v10.
//
// v0-v7 ask about one group, v8+ about several. Null topics (v2+) mean
// every committed offset. A partition with no committed offset comes back
// as -1 without error, also for a group that does not exist. RequireStable
// (v7+) never waits: Wharf has no transactional commits to be pending.
// v9+ KIP-848 consumers send their member id and epoch, which are checked.
// v10 names topics by id. Group-level errors go in the top-level error code
// from v2; v0-v1 put them on every partition.
//
// It needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED) and on
// each topic asked for (else TOPIC_AUTHORIZATION_FAILED); asked for every
// topic, the group's offsets of topics the principal may not DESCRIBE are
// left out.

func (s *Server) handleOffsetFetch(r *request, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			resp.Groups = append(resp.Groups, s.fetchGroupOffsets(r, req, rg))
		}
		return resp, nil
	}
	// v0-v7: the same lookup for the one group, in the old layout.
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = req.Group
	if req.Topics != nil {
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
	}
	for _, t := range req.Topics {
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = t.Topic, t.Partitions
		rg.Topics = append(rg.Topics, gt)
	}
	g := s.fetchGroupOffsets(r, req, rg)
	if req.Version >= 2 {
		resp.ErrorCode = g.ErrorCode
	}
	for _, gt := range g.Topics {
		t := kmsg.NewOffsetFetchResponseTopic()
		t.Topic = gt.Topic
		for _, gp := range gt.Partitions {
			p := kmsg.NewOffsetFetchResponseTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode
			if req.Version < 2 && g.ErrorCode != 0 {
				p.ErrorCode = g.ErrorCode
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// fetchGroupOffsets answers one group of an OffsetFetch, in the v8+ layout.
func (s *Server) fetchGroupOffsets(r *request, req *kmsg.OffsetFetchRequest, rg kmsg.OffsetFetchRequestGroup) kmsg.OffsetFetchResponseGroup {
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = rg.Group
	coord, err := s.coordinator()
	if err == nil && !s.allowed(r, opDescribe, resGroup, rg.Group) {
		err = errGroupDenied
	}
	if err != nil {
		out.ErrorCode = errorCode(err)
		return out
	}
	fr := group.FetchRequest{Group: rg.Group, RequireStable: req.RequireStable}
	if req.Version >= 9 {
		fr.MemberID, fr.MemberEpoch = rg.MemberID, rg.MemberEpoch
	}
	// Topics by id (v10) that do not exist are answered here.
	unknown := map[int]error{}
	if rg.Topics != nil {
		fr.Partitions = []group.TopicPartition{}
		for i, t := range rg.Topics {
			name := t.Topic
			if req.Version >= 10 {
				var err error
				if name, err = s.topicNameByID(t.TopicID); err != nil {
					unknown[i] = err
					continue
				}
				rg.Topics[i].Topic = name
			}
			if !s.allowed(r, opDescribe, resTopic, name) {
				unknown[i] = errTopicDenied
				continue
			}
			for _, p := range t.Partitions {
				fr.Partitions = append(fr.Partitions, group.TopicPartition{Topic: name, Partition: p})
			}
		}
	}
	fetched, err := coord.FetchOffsets(fr)
	if err != nil {
		out.ErrorCode = errorCode(err)
		return out
	}
	byTopic := map[string]int{}
	topicOf := func(name string, id [16]byte) *kmsg.OffsetFetchResponseGroupTopic {
		if i, ok := byTopic[name]; ok {
			return &out.Topics[i]
		}
		t := kmsg.NewOffsetFetchResponseGroupTopic()
		t.Topic, t.TopicID = name, id
		if req.Version >= 10 && id == ([16]byte{}) {
			if bt, err := s.broker.Topic(name); err == nil {
				t.TopicID = bt.ID()
			}
		}
		byTopic[name] = len(out.Topics)
		out.Topics = append(out.Topics, t)
		return &out.Topics[len(out.Topics)-1]
	}
	for i, t := range rg.Topics {
		if err, ok := unknown[i]; ok {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, errorCode(err)
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
			continue
		}
		topicOf(t.Topic, t.TopicID)
	}
	for _, f := range fetched {
		if rg.Topics == nil && !s.mayDo(r, opDescribe, resTopic, f.Topic) {
			continue
		}
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = f.Partition, f.Offset, f.LeaderEpoch
		rp.Metadata = kmsg.StringPtr(f.Metadata)
		rp.ErrorCode = errorCode(f.Err)
		t := topicOf(f.Topic, [16]byte{})
		t.Partitions = append(t.Partitions, rp)
	}
	return out
}
