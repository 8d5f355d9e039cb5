package group

import (
	"errors"
	"testing"
	"time"
)

func TestJoinHandsOutMemberIDFirst(t *testing.T) {
	h := newHarness(t)
	id, p := h.joinNew("g")
	r := p.must(t)
	if r.Err != nil || r.MemberID != id || r.Leader != id || r.Generation != 1 || r.Protocol != "range" || r.ProtocolType != "consumer" {
		t.Fatalf("second join: %+v, want generation 1 led by %s with protocol range", r, id)
	}
	if len(r.Members) != 1 || r.Members[0].MemberID != id || string(r.Members[0].Metadata) != "m" {
		t.Fatalf("leader's member list: %+v", r.Members)
	}
	if got := h.classicState("g"); got != classicCompletingRebalance {
		t.Fatalf("state %s, want CompletingRebalance", got)
	}
	s := h.sync(SyncRequest{Group: "g", Generation: 1, MemberID: id, Assignments: map[string][]byte{id: []byte("x")}}).must(t)
	if s.Err != nil || string(s.Assignment) != "x" || s.Protocol != "range" {
		t.Fatalf("sync: %+v", s)
	}
	if err := h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: id}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	// An id handed out but never used expires with the session timeout.
	first := h.join(JoinRequest{Group: "g", RequireKnownMemberID: true}).must(t)
	if !errors.Is(first.Err, ErrMemberIDRequired) {
		t.Fatalf("join: %v", first.Err)
	}
	h.advance(11 * time.Second)
	late := h.join(JoinRequest{Group: "g", MemberID: first.MemberID, RequireKnownMemberID: true}).must(t)
	if !errors.Is(late.Err, ErrUnknownMemberID) {
		t.Fatalf("join with an expired pending id: %v, want UNKNOWN_MEMBER_ID", late.Err)
	}
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		req  JoinRequest
		want error
	}{
		{JoinRequest{Group: ""}, ErrInvalidGroupID},
		{JoinRequest{Group: "g", SessionTimeout: time.Millisecond}, ErrInvalidSessionTimeout},
		{JoinRequest{Group: "g", SessionTimeout: time.Hour}, ErrInvalidSessionTimeout},
		{JoinRequest{Group: "g", Protocols: []Protocol{}}, ErrInconsistentGroupProtocol},
		{JoinRequest{Group: "g", MemberID: "nobody"}, ErrUnknownMemberID},
	}
	for _, c := range cases {
		if r := h.join(c.req).must(t); !errors.Is(r.Err, c.want) {
			t.Errorf("join %+v: %v, want %v", c.req, r.Err, c.want)
		}
	}
	if groups := h.c.ListGroups(nil, nil); len(groups) != 0 {
		t.Errorf("failed joins left groups behind: %+v", groups)
	}
}

func TestInitialRebalanceDelayWaitsForMoreMembers(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	_, p1 := h.joinNew("g", func(r *JoinRequest) { r.RebalanceTimeout = 10 * time.Second })
	h.advance(2 * time.Second)
	p1.mustWait(t)
	_, p2 := h.joinNew("g", func(r *JoinRequest) { r.RebalanceTimeout = 10 * time.Second })
	h.advance(time.Second) // t=3: the delay ends, but a member came: wait another 3 s
	p1.mustWait(t)
	h.advance(2900 * time.Millisecond)
	p1.mustWait(t)
	h.advance(100 * time.Millisecond) // t=6
	r1, r2 := p1.must(t), p2.must(t)
	if r1.Err != nil || r2.Err != nil || r1.Generation != 1 || r2.Generation != 1 {
		t.Fatalf("joins: %+v / %+v, want both in generation 1", r1, r2)
	}
	if len(r1.Members) != 2 && len(r2.Members) != 2 {
		t.Fatalf("the leader did not get both members: %+v %+v", r1, r2)
	}
}

func TestInitialDelayIsBoundedByRebalanceTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	var joins []pending[JoinResponse]
	for i := range 5 {
		_, p := h.joinNew("g", func(r *JoinRequest) { r.RebalanceTimeout = 7 * time.Second })
		joins = append(joins, p)
		if i < 4 {
			h.advance(2 * time.Second)
		}
	}
	// Members kept coming every 2 s, yet the join completes once the
	// 7 s rebalance timeout is used up (3 s + 3 s + 1 s).
	h.advance(2 * time.Second)
	for i, p := range joins {
		if r := p.must(t); r.Err != nil || r.Generation != 1 {
			t.Fatalf("join %d: %+v", i, r)
		}
	}
}

// TestInitialDelayOutlastsShorterRebalanceTimeout: Kafka holds the first
// generation of an empty group for the whole initial delay even when the
// members' rebalance timeout is shorter, so a member that comes after the
// rebalance timeout but within the delay still joins generation 1. With
// nothing of the rebalance timeout left over, the delay is not extended.
func TestInitialDelayOutlastsShorterRebalanceTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	shortTimeout := func(r *JoinRequest) { r.RebalanceTimeout = 2 * time.Second }
	_, p1 := h.joinNew("g", shortTimeout)
	h.advance(2500 * time.Millisecond) // past the rebalance timeout, within the delay
	p1.mustWait(t)
	_, p2 := h.joinNew("g", shortTimeout)
	h.advance(499 * time.Millisecond)
	p1.mustWait(t)
	h.advance(time.Millisecond) // t=3 s: the delay ends
	r1, r2 := p1.must(t), p2.must(t)
	if r1.Err != nil || r2.Err != nil || r1.Generation != 1 || r2.Generation != 1 {
		t.Fatalf("joins: %+v / %+v, want both in generation 1", r1, r2)
	}
}

func TestNewMemberTriggersRebalance(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 1)
	id2, p2 := h.joinNew("g")
	if got := h.classicState("g"); got != classicPreparingRebalance {
		t.Fatalf("state %s, want PreparingRebalance", got)
	}
	p2.mustWait(t)
	if err := h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[0]}); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("heartbeat during rebalance: %v", err)
	}
	p1 := h.join(JoinRequest{Group: "g", MemberID: ids[0], RequireKnownMemberID: true})
	gen2 := h.syncAll("g", []string{ids[0], id2}, map[string]pending[JoinResponse]{ids[0]: p1, id2: p2})
	if gen2 != gen+1 {
		t.Fatalf("generation %d, want %d", gen2, gen+1)
	}
	if r := p1.must(t); r.Leader != ids[0] {
		t.Fatalf("leader %s, want the old leader %s to stay", r.Leader, ids[0])
	}
}

// kafkaGoJoin is a JoinGroup as kafka-go's Reader sends it: v2, so no
// MEMBER_ID_REQUIRED round trip, a 30 s session and a 2 s rebalance timeout
// (the settings of kafka-go's TestReaderConsumerGroup).
func kafkaGoJoin(memberID string) JoinRequest {
	return JoinRequest{Group: "g", MemberID: memberID, SessionTimeout: 30 * time.Second, RebalanceTimeout: 2 * time.Second}
}

// Two consumers started together, the second one's first JoinGroup landing
// after the first one's JoinGroup answer but before its SyncGroup: Kafka
// (GroupCoordinator.doNewMemberJoinGroup -> addMemberAndRebalance ->
// prepareRebalance; doSyncGroup answers REBALANCE_IN_PROGRESS while
// PreparingRebalance) voids generation 1, and the leader's rejoin completes
// generation 2 with both members. This is the order in which kafka-go's
// consumer_group_rebalance fails: each reader then owns only its own
// partitions for the rest of the test.
func TestJoinBeforeLeaderSyncsVoidsTheGeneration(t *testing.T) {
	h := newHarness(t)
	first := h.join(kafkaGoJoin("")).must(t)
	if first.Err != nil || first.Generation != 1 || first.Leader != first.MemberID {
		t.Fatalf("first join: %+v, want generation 1 at once (no initial delay) led by the member", first)
	}
	second := h.join(kafkaGoJoin(""))
	second.mustWait(t)
	if got := h.classicState("g"); got != classicPreparingRebalance {
		t.Fatalf("state %s after a join during CompletingRebalance, want PreparingRebalance", got)
	}
	if r := h.sync(SyncRequest{Group: "g", Generation: 1, MemberID: first.MemberID}).must(t); !errors.Is(r.Err, ErrRebalanceInProgress) {
		t.Fatalf("leader's sync of generation 1: %+v, want REBALANCE_IN_PROGRESS", r)
	}
	rejoin := h.join(kafkaGoJoin(first.MemberID)).must(t)
	r2 := second.must(t)
	if rejoin.Err != nil || r2.Err != nil || rejoin.Generation != 2 || r2.Generation != 2 || len(rejoin.Members) != 2 || rejoin.Leader != first.MemberID {
		t.Fatalf("joins: %+v / %+v, want generation 2 with both, led by the first member", rejoin, r2)
	}
}

// The other order: the second consumer joins once generation 1 is stable,
// and the first, told of the rebalance by its heartbeat, rejoins only after
// the 2 s rebalance timeout (kafka-go waits for its partition readers' long
// polls first). Kafka (DelayedJoin expiring, onCompleteJoin removing the
// members that did not rejoin; doCurrentMemberJoinGroup answering
// UNKNOWN_MEMBER_ID to an id it no longer has) gives generation 2 to the
// second member alone. This is the order in which kafka-go's
// consumer_group_rebalance passes: the second reader reads all three
// partitions, the first one what it fetched in generation 1.
func TestRejoinAfterRebalanceTimeoutIsUnknownMember(t *testing.T) {
	h := newHarness(t)
	first := h.join(kafkaGoJoin("")).must(t)
	if r := h.sync(SyncRequest{Group: "g", Generation: 1, MemberID: first.MemberID, Assignments: map[string][]byte{first.MemberID: []byte("all")}}).must(t); r.Err != nil {
		t.Fatalf("sync: %v", r.Err)
	}
	second := h.join(kafkaGoJoin(""))
	h.advance(1900 * time.Millisecond)
	if err := h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: first.MemberID}); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("heartbeat: %v, want REBALANCE_IN_PROGRESS", err)
	}
	second.mustWait(t)
	h.advance(100 * time.Millisecond)
	r2 := second.must(t)
	if r2.Err != nil || r2.Generation != 2 || r2.Leader != r2.MemberID || len(r2.Members) != 1 {
		t.Fatalf("second join: %+v, want generation 2 with only itself", r2)
	}
	if r := h.join(kafkaGoJoin(first.MemberID)).must(t); !errors.Is(r.Err, ErrUnknownMemberID) {
		t.Fatalf("late rejoin of the removed member: %+v, want UNKNOWN_MEMBER_ID", r)
	}
}

func TestRebalanceTimeoutRemovesMembersThatDoNotRejoin(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	id3, p3 := h.joinNew("g")
	p1 := h.join(JoinRequest{Group: "g", MemberID: ids[0], RequireKnownMemberID: true})
	// ids[1] keeps heartbeating but never rejoins.
	for range 4 {
		h.advance(4 * time.Second)
		h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[1]})
	}
	p1.mustWait(t)
	h.advance(5 * time.Second) // 21 s > the 20 s rebalance timeout
	r := p1.must(t)
	if r.Err != nil || r.Generation != gen+1 || len(r.Members) != 2 {
		t.Fatalf("join: %+v, want generation %d with 2 members", r, gen+1)
	}
	h.syncAll("g", []string{ids[0], id3}, map[string]pending[JoinResponse]{ids[0]: p1, id3: p3})
	if err := h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen + 1, MemberID: ids[1]}); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("heartbeat of the removed member: %v, want UNKNOWN_MEMBER_ID", err)
	}
}

func TestSessionExpiryRebalances(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	for range 3 {
		h.advance(4 * time.Second)
		if err := h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[0]}); err != nil && !errors.Is(err, ErrRebalanceInProgress) {
			t.Fatal(err)
		}
	}
	// 12 s without a heartbeat from ids[1], whose session is 10 s.
	if got := h.classicState("g"); got != classicPreparingRebalance {
		t.Fatalf("state %s, want PreparingRebalance after a session expired", got)
	}
	p := h.join(JoinRequest{Group: "g", MemberID: ids[0], RequireKnownMemberID: true})
	if r := p.must(t); r.Err != nil || len(r.Members) != 1 || r.Generation != gen+1 {
		t.Fatalf("join after expiry: %+v", r)
	}
}

func TestLastMemberLeavingEmptiesTheGroup(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	res, err := h.c.LeaveGroup("g", []LeavingMember{{MemberID: ids[1]}, {MemberID: "stranger"}})
	if err != nil || res[0] != nil || !errors.Is(res[1], ErrUnknownMemberID) {
		t.Fatalf("leave: %v %v", res, err)
	}
	p := h.join(JoinRequest{Group: "g", MemberID: ids[0], RequireKnownMemberID: true})
	if r := p.must(t); r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
	h.c.LeaveGroup("g", []LeavingMember{{MemberID: ids[0]}})
	if got := h.classicState("g"); got != classicEmpty {
		t.Fatalf("state %s, want Empty", got)
	}
	if g := h.c.ListGroups(nil, nil); len(g) != 1 || g[0].State != "Empty" || g[0].ProtocolType != "consumer" {
		t.Fatalf("list: %+v", g)
	}
}

func TestProtocolSelection(t *testing.T) {
	h := newHarness(t)
	protos := func(names ...string) func(*JoinRequest) {
		return func(r *JoinRequest) {
			r.Protocols = nil
			for _, n := range names {
				r.Protocols = append(r.Protocols, Protocol{Name: n})
			}
		}
	}
	id1, p1 := h.joinNew("g", protos("cooperative-sticky", "range"))
	if r := p1.must(t); r.Protocol != "cooperative-sticky" {
		t.Fatalf("protocol %q", r.Protocol)
	}
	h.sync(SyncRequest{Group: "g", Generation: 1, MemberID: id1}).must(t)

	// A member that supports only "roundrobin" has nothing in common.
	first := h.join(JoinRequest{Group: "g", RequireKnownMemberID: true, Protocols: []Protocol{{Name: "roundrobin"}}}).must(t)
	if !errors.Is(first.Err, ErrInconsistentGroupProtocol) {
		t.Fatalf("join with no common protocol: %v", first.Err)
	}
	other := h.join(JoinRequest{Group: "g", RequireKnownMemberID: true, ProtocolType: "connect"}).must(t)
	if !errors.Is(other.Err, ErrInconsistentGroupProtocol) {
		t.Fatalf("join with another protocol type: %v", other.Err)
	}

	// An eager-only member downgrades the group to the protocol both
	// support, as the cooperative-sticky clients expect.
	id2, p2 := h.joinNew("g", protos("range"))
	p1 = h.join(JoinRequest{Group: "g", MemberID: id1, RequireKnownMemberID: true, Protocols: []Protocol{{Name: "cooperative-sticky"}, {Name: "range"}}})
	r1, r2 := p1.must(t), p2.must(t)
	if r1.Protocol != "range" || r2.Protocol != "range" {
		t.Fatalf("protocols %q %q, want range", r1.Protocol, r2.Protocol)
	}
	_ = id2
}

func TestStaticMemberRejoinKeepsAssignmentWithoutRebalance(t *testing.T) {
	h := newHarness(t)
	inst := "instance-a"
	first := h.join(JoinRequest{Group: "g", InstanceID: &inst, RequireKnownMemberID: true}).must(t)
	if first.Err != nil {
		t.Fatalf("static members join without MEMBER_ID_REQUIRED: %v", first.Err)
	}
	oldID := first.MemberID
	h.sync(SyncRequest{Group: "g", Generation: 1, MemberID: oldID, InstanceID: &inst, Assignments: map[string][]byte{oldID: []byte("mine")}}).must(t)

	// The client restarts: it joins with no member id and the same instance.
	again := h.join(JoinRequest{Group: "g", InstanceID: &inst, RequireKnownMemberID: true}).must(t)
	if again.Err != nil || again.MemberID == oldID || again.Generation != 1 || !again.SkipAssignment || again.Leader != again.MemberID {
		t.Fatalf("static rejoin: %+v, want a new id in generation 1, leader, with SkipAssignment", again)
	}
	if got := h.classicState("g"); got != classicStable {
		t.Fatalf("state %s, want Stable (no rebalance)", got)
	}
	s := h.sync(SyncRequest{Group: "g", Generation: 1, MemberID: again.MemberID, InstanceID: &inst}).must(t)
	if s.Err != nil || string(s.Assignment) != "mine" {
		t.Fatalf("sync after static rejoin: %+v, want the kept assignment", s)
	}
	err := h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: oldID, InstanceID: &inst})
	if !errors.Is(err, ErrFencedInstanceID) {
		t.Fatalf("heartbeat of the old incarnation: %v, want FENCED_INSTANCE_ID", err)
	}
	// The mapping survives a restart.
	h.restart()
	if err := h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: again.MemberID, InstanceID: &inst}); err != nil {
		t.Fatalf("heartbeat after restart: %v", err)
	}
	res, _ := h.c.LeaveGroup("g", []LeavingMember{{InstanceID: &inst}})
	if res[0] != nil {
		t.Fatalf("leave by instance id: %v", res[0])
	}
	if got := h.classicState("g"); got != classicEmpty {
		t.Fatalf("state %s after the static member left", got)
	}
}

func TestStaticRejoinFencesParkedJoin(t *testing.T) {
	h := newHarness(t)
	ids, _ := h.stableGroup("g", 1)
	inst := "i"
	pStatic := h.join(JoinRequest{Group: "g", InstanceID: &inst, RequireKnownMemberID: true})
	// Static members need no MEMBER_ID_REQUIRED round. pStatic is parked (ids[0] has not rejoined). The same instance
	// comes back from a new process: the parked join is fenced.
	again := h.join(JoinRequest{Group: "g", InstanceID: &inst})
	if r := pStatic.must(t); !errors.Is(r.Err, ErrFencedInstanceID) {
		t.Fatalf("parked join of the old incarnation: %+v", r)
	}
	p1 := h.join(JoinRequest{Group: "g", MemberID: ids[0], RequireKnownMemberID: true})
	if r := again.must(t); r.Err != nil || len(p1.must(t).Members)+len(r.Members) != 2 {
		t.Fatalf("join of the new incarnation: %+v", r)
	}
}

func TestSyncRules(t *testing.T) {
	h := newHarness(t)
	id1, p1 := h.joinNew("g")
	p1.must(t)
	if r := h.sync(SyncRequest{Group: "g", Generation: 7, MemberID: id1}).must(t); !errors.Is(r.Err, ErrIllegalGeneration) {
		t.Fatalf("sync with a wrong generation: %v", r.Err)
	}
	other := "other"
	if r := h.sync(SyncRequest{Group: "g", Generation: 1, MemberID: id1, Protocol: &other}).must(t); !errors.Is(r.Err, ErrInconsistentGroupProtocol) {
		t.Fatalf("sync with a wrong protocol: %v", r.Err)
	}
	// The leader assigns nothing to itself: a consumer gets a decodable
	// empty assignment.
	r := h.sync(SyncRequest{Group: "g", Generation: 1, MemberID: id1, Assignments: map[string][]byte{}}).must(t)
	if r.Err != nil || len(r.Assignment) == 0 {
		t.Fatalf("sync with no assignment for the member: %+v", r)
	}
}

func TestFollowerSyncWaitsForLeader(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 1)
	id2, p2 := h.joinNew("g")
	p1 := h.join(JoinRequest{Group: "g", MemberID: ids[0], RequireKnownMemberID: true})
	r1, r2 := p1.must(t), p2.must(t)
	if r1.Generation != gen+1 || r2.Generation != gen+1 {
		t.Fatal("generations")
	}
	follower := h.sync(SyncRequest{Group: "g", Generation: gen + 1, MemberID: id2})
	follower.mustWait(t)
	// The leader never syncs: after the rebalance timeout it is removed
	// and the waiting follower must rejoin.
	h.advance(21 * time.Second)
	if r := follower.must(t); !errors.Is(r.Err, ErrRebalanceInProgress) {
		t.Fatalf("follower sync: %+v, want REBALANCE_IN_PROGRESS", r)
	}
	if got := h.classicState("g"); got != classicPreparingRebalance {
		t.Fatalf("state %s", got)
	}
}

func TestJavaHashPartitioning(t *testing.T) {
	cases := map[string]int32{"hello": 99162322, "Aa": 2112, "BB": 2112, "": 0, "\U0001F600": 1772899, "polygenelubricants": -1 << 31}
	for s, want := range cases {
		if got := javaStringHash(s); got != want {
			t.Errorf("javaStringHash(%q) = %d, want %d", s, got, want)
		}
	}
	if p := partitionForGroup("polygenelubricants", 50); p != 0 {
		t.Errorf("MIN_VALUE hash maps to %d, want 0", p)
	}
	if p := partitionForGroup("hello", 50); p != 99162322%50 {
		t.Errorf("hello -> %d", p)
	}
}
