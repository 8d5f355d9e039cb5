package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// withGroups gives the server a group coordinator with no rebalance delay.
func withGroups(t *testing.T) serverOption {
	return withServer(func(s *Server) {
		c, err := group.Open(group.Config{
			Broker:                s.broker,
			InitialRebalanceDelay: -1,
			MinSessionTimeout:     time.Second,
			Logger:                testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s.groups.Store(c)
	})
}

func versioned[T interface{ SetVersion(int16) }](v int16, req T) T {
	req.SetVersion(v)
	return req
}

func TestFindCoordinatorVersions(t *testing.T) {
	ts := startServer(t, withGroups(t), withTransactions(t))
	c := ts.dial(t)
	old := versioned(0, kmsg.NewPtrFindCoordinatorRequest())
	old.CoordinatorKey = "g"
	r0 := c.roundTrip(old).(*kmsg.FindCoordinatorResponse)
	if r0.ErrorCode != 0 || r0.Host != "127.0.0.1" || r0.NodeID != ts.b.NodeID() {
		t.Fatalf("v0: %+v", r0)
	}
	batch := versioned(4, kmsg.NewPtrFindCoordinatorRequest())
	batch.CoordinatorKeys = []string{"a", "b"}
	r4 := c.roundTrip(batch).(*kmsg.FindCoordinatorResponse)
	if len(r4.Coordinators) != 2 || r4.Coordinators[1].Key != "b" || r4.Coordinators[1].ErrorCode != 0 {
		t.Fatalf("v4: %+v", r4)
	}
	txn := versioned(4, kmsg.NewPtrFindCoordinatorRequest())
	txn.CoordinatorType, txn.CoordinatorKeys = 1, []string{"tx"}
	if r := c.roundTrip(txn).(*kmsg.FindCoordinatorResponse); r.Coordinators[0].ErrorCode != 0 || r.Coordinators[0].NodeID != ts.b.NodeID() {
		t.Fatalf("transaction coordinator: %+v", r.Coordinators[0])
	}

	bare := startServer(t) // no coordinator
	if r := bare.dial(t).roundTrip(versioned(0, kmsg.NewPtrFindCoordinatorRequest())).(*kmsg.FindCoordinatorResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("server without coordinator: %+v", r)
	}
}

// TestClassicGroupOldestVersions drives a group through the v0 requests
// kafka-go and old sarama configurations still send.
func TestClassicGroupOldestVersions(t *testing.T) {
	ts := startServer(t, withGroups(t))
	ts.createTopic(t, "t", 1, nil)
	c := ts.dial(t)

	join := versioned(0, kmsg.NewPtrJoinGroupRequest())
	join.Group, join.SessionTimeoutMillis, join.ProtocolType = "g", 6000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1}}}
	jr := c.roundTrip(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 || jr.Generation != 1 || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 || jr.Protocol == nil || *jr.Protocol != "range" {
		t.Fatalf("join v0: %+v", jr)
	}
	sync := versioned(0, kmsg.NewPtrSyncGroupRequest())
	sync.Group, sync.Generation, sync.MemberID = "g", 1, jr.MemberID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("mine")}}
	if sr := c.roundTrip(sync).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 || string(sr.MemberAssignment) != "mine" {
		t.Fatalf("sync v0: %+v", sr)
	}
	hb := versioned(0, kmsg.NewPtrHeartbeatRequest())
	hb.Group, hb.Generation, hb.MemberID = "g", 1, jr.MemberID
	if r := c.roundTrip(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("heartbeat v0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	hb.Generation = 9
	if r := c.roundTrip(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("heartbeat v0 with a wrong generation: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	commit := versioned(2, kmsg.NewPtrOffsetCommitRequest())
	commit.Group, commit.Generation, commit.MemberID = "g", 1, jr.MemberID
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42}, {Partition: 5, Offset: 1}}}}
	cr := c.roundTrip(commit).(*kmsg.OffsetCommitResponse)
	if cr.Topics[0].Partitions[0].ErrorCode != 0 || cr.Topics[0].Partitions[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit v2: %+v", cr.Topics)
	}
	fetch := versioned(1, kmsg.NewPtrOffsetFetchRequest())
	fetch.Group = "g"
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if fr := c.roundTrip(fetch).(*kmsg.OffsetFetchResponse); fr.Topics[0].Partitions[0].Offset != 42 {
		t.Fatalf("fetch v1: %+v", fr.Topics)
	}

	leave := versioned(0, kmsg.NewPtrLeaveGroupRequest())
	leave.Group, leave.MemberID = "g", jr.MemberID
	if r := c.roundTrip(leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("leave v0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.roundTrip(leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("second leave v0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	desc := versioned(0, kmsg.NewPtrDescribeGroupsRequest())
	desc.Groups = []string{"g"}
	if d := c.roundTrip(desc).(*kmsg.DescribeGroupsResponse); d.Groups[0].State != "Empty" || d.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("describe v0: %+v", d.Groups[0])
	}
}

func TestGroupAdminVersions(t *testing.T) {
	ts := startServer(t, withGroups(t))
	topic := ts.createTopic(t, "t", 2, nil)
	c := ts.dial(t)

	// v10 commits and fetches name topics by id.
	commit := versioned(10, kmsg.NewPtrOffsetCommitRequest())
	commit.Group, commit.Generation = "tool", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{
		{TopicID: topic.ID(), Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 7, LeaderEpoch: -1}}},
		{TopicID: [16]byte{9}, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}},
	}
	cr := c.roundTrip(commit).(*kmsg.OffsetCommitResponse)
	if cr.Topics[0].Partitions[0].ErrorCode != 0 || cr.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("commit v10: %+v", cr.Topics)
	}
	fetch := versioned(10, kmsg.NewPtrOffsetFetchRequest())
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "tool"}, {Group: "unknown", Topics: []kmsg.OffsetFetchRequestGroupTopic{{TopicID: topic.ID(), Partitions: []int32{0}}}}}
	fr := c.roundTrip(fetch).(*kmsg.OffsetFetchResponse)
	if g := fr.Groups[0]; len(g.Topics) != 1 || g.Topics[0].TopicID != topic.ID() || g.Topics[0].Partitions[0].Offset != 7 {
		t.Fatalf("fetch v10 of every offset: %+v", g)
	}
	if g := fr.Groups[1]; g.ErrorCode != 0 || g.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("fetch v10 of an unknown group: %+v", g)
	}

	// An unknown group is Dead; v6 adds GROUP_ID_NOT_FOUND.
	for v, want := range map[int16]int16{5: 0, 6: kerr.GroupIDNotFound.Code} {
		d := versioned(v, kmsg.NewPtrDescribeGroupsRequest())
		d.Groups = []string{"ghost"}
		if g := c.roundTrip(d).(*kmsg.DescribeGroupsResponse).Groups[0]; g.State != "Dead" || g.ErrorCode != want {
			t.Fatalf("describe v%d of an unknown group: %+v", v, g)
		}
	}
	list := versioned(5, kmsg.NewPtrListGroupsRequest())
	list.StatesFilter, list.TypesFilter = []string{"empty"}, []string{"classic"}
	if l := c.roundTrip(list).(*kmsg.ListGroupsResponse); len(l.Groups) != 1 || l.Groups[0].Group != "tool" || l.Groups[0].GroupType != "classic" {
		t.Fatalf("list v5: %+v", l.Groups)
	}
	cgd := versioned(1, kmsg.NewPtrConsumerGroupDescribeRequest())
	cgd.Groups = []string{"tool"}
	if g := c.roundTrip(cgd).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe of a classic group: %+v", g)
	}
	od := versioned(0, kmsg.NewPtrOffsetDeleteRequest())
	od.Group = "tool"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 1}}}}
	if r := c.roundTrip(od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", r)
	}
	del := versioned(3, kmsg.NewPtrDeleteGroupsRequest())
	del.Groups = []string{"tool", "ghost"}
	dr := c.roundTrip(del).(*kmsg.DeleteGroupsResponse)
	if dr.Groups[0].ErrorCode != 0 || dr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code || dr.Groups[1].ErrorMessage == nil {
		t.Fatalf("delete groups v3: %+v", dr.Groups)
	}
}

func TestConsumerGroupHeartbeatV0GetsMemberID(t *testing.T) {
	ts := startServer(t, withGroups(t))
	topic := ts.createTopic(t, "t", 3, nil)
	c := ts.dial(t)
	hb := versioned(0, kmsg.NewPtrConsumerGroupHeartbeatRequest())
	hb.Group, hb.RebalanceTimeoutMillis = "next", 10000
	hb.SubscribedTopicNames = []string{"t"}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	r := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 || r.MemberID == nil || *r.MemberID == "" || r.MemberEpoch != 1 || r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("join: %+v", r)
	}
	if r.Assignment == nil || len(r.Assignment.Topics) != 1 || r.Assignment.Topics[0].TopicID != topic.ID() || len(r.Assignment.Topics[0].Partitions) != 3 {
		t.Fatalf("assignment: %+v", r.Assignment)
	}
	// A keepalive (nulls everywhere) gets no assignment back.
	keep := versioned(0, kmsg.NewPtrConsumerGroupHeartbeatRequest())
	keep.Group, keep.MemberID, keep.MemberEpoch, keep.RebalanceTimeoutMillis = "next", *r.MemberID, 1, -1
	if k := c.roundTrip(keep).(*kmsg.ConsumerGroupHeartbeatResponse); k.ErrorCode != 0 || k.Assignment != nil || k.MemberEpoch != 1 {
		t.Fatalf("keepalive: %+v", k)
	}
	d := versioned(1, kmsg.NewPtrConsumerGroupDescribeRequest())
	d.Groups = []string{"next"}
	g := c.roundTrip(d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	if g.ErrorCode != 0 || g.State != "Stable" || g.AssignorName != "uniform" || len(g.Members) != 1 || g.Members[0].Assignment.TopicPartitions[0].Topic != "t" || g.Members[0].MemberType != 1 {
		t.Fatalf("describe: %+v", g)
	}
}
