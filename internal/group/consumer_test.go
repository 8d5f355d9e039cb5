package group

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// sim is a KIP-848 client as the protocol expects one to behave: it adopts
// every assignment it is sent (dropping what is no longer in it at once)
// and reports what it owns in each heartbeat.
type sim struct {
	h     *harness
	group string
	id    string
	epoch int32
	owned partitionSet
	// instance makes it a static member.
	instance *string
}

func (h *harness) newSim(group, id string, topics ...string) *sim {
	s := &sim{h: h, group: group, id: id, owned: partitionSet{}}
	r := h.consumerJoin(group, id, topics)
	s.apply(r)
	return s
}

func (s *sim) apply(r ConsumerHeartbeatResponse) {
	s.epoch = r.MemberEpoch
	if r.HasAssignment {
		s.owned = fromTopicPartitions(r.Assignment)
	}
}

func (s *sim) beat() ConsumerHeartbeatResponse {
	r := s.h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{
		Group: s.group, MemberID: s.id, MemberEpoch: s.epoch, InstanceID: s.instance,
		RebalanceTimeout: -1, Owned: s.owned.toTopicPartitions(),
	})
	if r.Err == nil {
		s.apply(r)
	}
	return r
}

func (s *sim) mustBeat(t *testing.T) ConsumerHeartbeatResponse {
	t.Helper()
	r := s.beat()
	if r.Err != nil {
		t.Fatalf("heartbeat of %s: %v", s.id, r.Err)
	}
	return r
}

// checkDisjoint fails if two clients own the same partition.
func checkDisjoint(t *testing.T, sims []*sim) {
	t.Helper()
	owner := map[topicPartition]string{}
	for _, s := range sims {
		for tp := range s.owned {
			if o, ok := owner[tp]; ok {
				t.Fatalf("partition %d owned by %s and %s at once", tp.partition, o, s.id)
			}
			owner[tp] = s.id
		}
	}
}

// settle heartbeats every sim until nothing changes, checking ownership
// after each heartbeat.
func settle(t *testing.T, sims []*sim) {
	t.Helper()
	for round := 0; round < 20; round++ {
		changed := false
		for _, s := range sims {
			before := fmt.Sprint(s.epoch, s.owned.toTopicPartitions())
			s.mustBeat(t)
			checkDisjoint(t, sims)
			changed = changed || before != fmt.Sprint(s.epoch, s.owned.toTopicPartitions())
		}
		if !changed {
			return
		}
	}
	t.Fatal("the group did not settle")
}

func (h *harness) consumerState(name string) string {
	st := "Dead"
	h.c.withGroup(name, false, func(g *group) { st = g.state() })
	return st
}

func TestConsumerRevokesBeforeAssigning(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 6)
	m1 := h.newSim("g", "m1", "t")
	if m1.epoch != 1 || len(m1.owned) != 6 {
		t.Fatalf("first member: epoch %d, %d partitions", m1.epoch, len(m1.owned))
	}
	m2 := h.newSim("g", "m2", "t")
	sims := []*sim{m1, m2}
	checkDisjoint(t, sims)
	if m2.epoch != 2 || len(m2.owned) != 0 {
		t.Fatalf("second member: epoch %d with %d partitions, want 2 with none (m1 still owns them)", m2.epoch, len(m2.owned))
	}
	if got := h.consumerState("g"); got != "Reconciling" {
		t.Fatalf("state %s", got)
	}
	// m1 is told to give up three partitions; its epoch waits.
	m1.mustBeat(t)
	if m1.epoch != 1 || len(m1.owned) != 3 {
		t.Fatalf("m1 after the revocation request: epoch %d, %d partitions", m1.epoch, len(m1.owned))
	}
	// Until m1 confirms, m2 gets nothing.
	m2.mustBeat(t)
	if len(m2.owned) != 0 {
		t.Fatalf("m2 got %d partitions before m1 confirmed the revocation", len(m2.owned))
	}
	m1.mustBeat(t) // confirms: owns 3
	if m1.epoch != 2 {
		t.Fatalf("m1 epoch %d after confirming, want 2", m1.epoch)
	}
	m2.mustBeat(t)
	if m2.epoch != 2 || len(m2.owned) != 3 {
		t.Fatalf("m2: epoch %d, %d partitions", m2.epoch, len(m2.owned))
	}
	checkDisjoint(t, sims)
	if got := h.consumerState("g"); got != "Stable" {
		t.Fatalf("state %s, want Stable", got)
	}
	// m2 leaves: m1 gets everything back.
	if r := h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "m2", MemberEpoch: -1}); r.Err != nil || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	m1.mustBeat(t)
	if len(m1.owned) != 6 || m1.epoch != 3 {
		t.Fatalf("m1 after m2 left: epoch %d, %d partitions", m1.epoch, len(m1.owned))
	}
}

func TestConsumerChurnNeverDoubleAssigns(t *testing.T) {
	h := newHarness(t)
	h.createTopic("a", 7)
	h.createTopic("b", 5)
	rng := rand.New(rand.NewPCG(1, 2))
	var sims []*sim
	next := 0
	for step := 0; step < 400; step++ {
		switch op := rng.IntN(10); {
		case op < 2 && len(sims) < 6:
			next++
			topics := []string{"a", "b"}
			if rng.IntN(3) == 0 {
				topics = []string{"a"}
			}
			sims = append(sims, h.newSim("g", fmt.Sprintf("m%d", next), topics...))
		case op < 3 && len(sims) > 1:
			i := rng.IntN(len(sims))
			h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: sims[i].id, MemberEpoch: -1})
			sims = append(sims[:i], sims[i+1:]...)
		case len(sims) > 0:
			s := sims[rng.IntN(len(sims))]
			if r := s.beat(); r.Err != nil {
				t.Fatalf("step %d: heartbeat of %s: %v", step, s.id, r.Err)
			}
		}
		checkDisjoint(t, sims)
	}
	settle(t, sims)
	total := 0
	for _, s := range sims {
		total += len(s.owned)
	}
	if total != 12 {
		t.Fatalf("after settling %d of 12 partitions are owned", total)
	}
	if got := h.consumerState("g"); got != "Stable" {
		t.Fatalf("state %s, want Stable", got)
	}
}

func TestConsumerFencing(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 2)
	m1 := h.newSim("g", "m1", "t")
	r := h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "m1", MemberEpoch: 7, RebalanceTimeout: -1})
	if !errors.Is(r.Err, ErrFencedMemberEpoch) {
		t.Fatalf("wrong epoch: %v", r.Err)
	}
	r = h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "ghost", MemberEpoch: 3, RebalanceTimeout: -1})
	if !errors.Is(r.Err, ErrUnknownMemberID) {
		t.Fatalf("unknown member: %v", r.Err)
	}
	// A lost response: the member retries with its previous epoch and
	// owns nothing it should not.
	h.newSim("g", "m2", "t")
	m1.mustBeat(t) // revoke one
	m1.mustBeat(t) // confirm, epoch advances
	prev := m1.epoch
	s := *m1
	s.epoch = prev - 1
	h.c.withGroup("g", false, func(g *group) { g.consumer.members["m1"].previousEpoch = prev - 1 })
	if r := s.beat(); r.Err != nil {
		t.Fatalf("heartbeat at the previous epoch: %v", r.Err)
	}
	// Rejoining with epoch 0 and the same id is allowed (after fencing).
	if r := h.consumerJoin("g", "m1", []string{"t"}); r.MemberEpoch == 0 {
		t.Fatalf("rejoin: %+v", r)
	}
	if r := h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "m3", SubscribedTopicNames: []string{"t"}, RebalanceTimeout: time.Second, Owned: []TopicPartitions{{Partitions: []int32{1}}}}); !errors.Is(r.Err, ErrInvalidRequest) {
		t.Fatalf("join claiming partitions: %v", r.Err)
	}
	if r := h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "m3", SubscribedTopicNames: []string{"t"}, RebalanceTimeout: time.Second, ServerAssignor: ptr("sticky")}); !errors.Is(r.Err, ErrUnsupportedAssignor) {
		t.Fatalf("unknown assignor: %v", r.Err)
	}
	if r := h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "m3", SubscribedTopicRegex: ptr("("), RebalanceTimeout: time.Second}); !errors.Is(r.Err, ErrInvalidRegularExpression) {
		t.Fatalf("bad regex: %v", r.Err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestConsumerTimeouts(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ConsumerSessionTimeout = 10 * time.Second })
	h.createTopic("t", 4)
	m1 := h.newSim("g", "m1", "t")
	m2 := h.newSim("g", "m2", "t")
	// m2 goes silent: after the session timeout m1 owns everything again.
	for range 3 {
		h.advance(4 * time.Second)
		m1.mustBeat(t)
	}
	settle(t, []*sim{m1})
	if len(m1.owned) != 4 {
		t.Fatalf("m1 owns %d after m2 expired", len(m1.owned))
	}
	if r := m2.beat(); !errors.Is(r.Err, ErrUnknownMemberID) {
		t.Fatalf("expired member: %v", r.Err)
	}

	// m3 joins and m1 never revokes: after its rebalance timeout (30 s,
	// heartbeats continuing without confirming) m1 is fenced.
	m3 := h.newSim("g", "m3", "t")
	m1.mustBeat(t) // told to revoke
	keep := m1.owned
	for range 8 {
		h.advance(4 * time.Second)
		// Keep claiming the old partitions: no confirmation.
		m1.owned = partitionSet{}
		h.c.withGroup("g", false, func(g *group) {
			if m := g.consumer.members["m1"]; m != nil {
				for tp := range m.revoking {
					m1.owned[tp] = struct{}{}
				}
			}
		})
		for tp := range keep {
			m1.owned[tp] = struct{}{}
		}
		if r := m1.beat(); r.Err != nil {
			break
		}
		m3.mustBeat(t)
	}
	if r := m1.beat(); !errors.Is(r.Err, ErrUnknownMemberID) {
		t.Fatalf("a member that never revoked: %v, want it fenced", r.Err)
	}
	settle(t, []*sim{m3})
	if len(m3.owned) != 4 {
		t.Fatalf("m3 owns %d", len(m3.owned))
	}
}

func TestConsumerStaticMember(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 4)
	inst := "i1"
	m1 := &sim{h: h, group: "g", id: "a", owned: partitionSet{}, instance: &inst}
	m1.apply(h.consumerJoin("g", "a", []string{"t"}, func(r *ConsumerHeartbeatRequest) { r.InstanceID = &inst }))
	m2 := h.newSim("g", "b", "t")
	settle(t, []*sim{m1, m2})
	owned := m1.owned
	epoch := h.describeConsumer("g").Epoch

	// Another process with the same instance id while m1 is active.
	r := h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "c", InstanceID: &inst, SubscribedTopicNames: []string{"t"}, RebalanceTimeout: time.Second, Owned: []TopicPartitions{}})
	if !errors.Is(r.Err, ErrUnreleasedInstanceID) {
		t.Fatalf("second process with the instance id: %v", r.Err)
	}
	// m1 leaves for now (-2) and comes back as a new member id: it gets
	// the same partitions and the group epoch does not move.
	r = h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: -2, InstanceID: &inst})
	if r.Err != nil || r.MemberEpoch != -2 {
		t.Fatalf("static leave: %+v", r)
	}
	m2.mustBeat(t)
	if len(m2.owned) != 2 {
		t.Fatalf("m2 took partitions of the away static member: %d", len(m2.owned))
	}
	back := h.consumerJoin("g", "a2", []string{"t"}, func(r *ConsumerHeartbeatRequest) { r.InstanceID = &inst })
	if !fromTopicPartitions(back.Assignment).equalTo(owned.toTopicPartitions()) {
		t.Fatalf("static member came back with %v, had %v", back.Assignment, owned.toTopicPartitions())
	}
	if got := h.describeConsumer("g").Epoch; got != epoch {
		t.Fatalf("group epoch %d after a static bounce, want %d", got, epoch)
	}
	if r := m1.beat(); !errors.Is(r.Err, ErrFencedInstanceID) {
		t.Fatalf("old incarnation: %v, want FENCED_INSTANCE_ID", r.Err)
	}
}

func (h *harness) describeConsumer(name string) ConsumerGroupDescription {
	return h.c.DescribeConsumerGroups([]string{name})[0]
}

func TestConsumerCommitEpochs(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 2)
	m1 := h.newSim("g", "m1", "t")
	commit := func(id string, epoch int32, p int32) error {
		return commitOne(h, CommitRequest{Group: "g", MemberID: id, Generation: epoch, Offsets: []OffsetCommit{{Topic: "t", Partition: p, Offset: 1}}})
	}
	if err := commit("m1", m1.epoch, 0); err != nil {
		t.Fatal(err)
	}
	if err := commit("m1", m1.epoch+1, 0); !errors.Is(err, ErrFencedMemberEpoch) {
		t.Fatalf("commit from the future: %v", err)
	}
	if err := commit("zz", 1, 0); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("commit from a stranger: %v", err)
	}
	if err := commitOne(h, CommitRequest{Group: "g", Generation: -1, Offsets: []OffsetCommit{{Topic: "t", Offset: 1}}}); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("admin commit to a group with members: %v", err)
	}
	old := m1.epoch
	m2 := h.newSim("g", "m2", "t")
	settle(t, []*sim{m1, m2})
	var kept int32 = -1
	for tp := range m1.owned {
		kept = tp.partition
	}
	// KIP-1251: m1 may still commit at its old epoch for the partition it
	// held since then, not for one it has given up.
	if err := commit("m1", old, kept); err != nil {
		t.Fatalf("commit at the old epoch for a kept partition: %v", err)
	}
	if err := commit("m1", old, 1-kept); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Fatalf("commit at the old epoch for a revoked partition: %v", err)
	}
	if _, err := h.c.FetchOffsets(FetchRequest{Group: "g", MemberID: ptr("m1"), MemberEpoch: old}); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Fatalf("offset fetch at an old epoch: %v", err)
	}
	if _, err := h.c.FetchOffsets(FetchRequest{Group: "g", MemberID: ptr("m1"), MemberEpoch: m1.epoch}); err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
}

func TestAssignors(t *testing.T) {
	h := newHarness(t)
	a := h.createTopic("a", 4)
	b := h.createTopic("b", 4)
	topics := map[string]topicMeta{"a": metaOf(a), "b": metaOf(b)}
	both := map[string]bool{"a": true, "b": true}
	members := []assignorMember{{id: "m1", topics: both}, {id: "m2", topics: both}, {id: "m3", topics: map[string]bool{"a": true}}}

	r := assignRange(members, topics)
	parts := func(s partitionSet, id [16]byte) (out []int32) {
		for _, t := range s.toTopicPartitions() {
			if t.TopicID == id {
				out = t.Partitions
			}
		}
		return out
	}
	if fmt.Sprint(parts(r["m1"], a.ID()), parts(r["m2"], a.ID()), parts(r["m3"], a.ID())) != "[0 1] [2] [3]" {
		t.Errorf("range over a: %v %v %v", parts(r["m1"], a.ID()), parts(r["m2"], a.ID()), parts(r["m3"], a.ID()))
	}
	if fmt.Sprint(parts(r["m1"], b.ID()), parts(r["m2"], b.ID())) != "[0 1] [2 3]" {
		t.Errorf("range over b: %v %v", parts(r["m1"], b.ID()), parts(r["m2"], b.ID()))
	}

	u := assignUniform(members, topics)
	counts := []int{len(u["m1"]), len(u["m2"]), len(u["m3"])}
	if counts[0]+counts[1]+counts[2] != 8 || max(counts[0], counts[1], counts[2])-min(counts[0], counts[1], counts[2]) > 1 {
		t.Errorf("uniform counts %v", counts)
	}
	for tp := range u["m3"] {
		if tp.topic != a.ID() {
			t.Errorf("m3 got a partition of b, which it does not subscribe to")
		}
	}
	// Stickiness: with the previous target given, one member leaving moves
	// only its partitions.
	members2 := []assignorMember{{id: "m1", topics: both, previous: u["m1"]}, {id: "m2", topics: both, previous: u["m2"]}}
	u2 := assignUniform(members2, topics)
	for tp := range u["m1"] {
		if !u2["m1"].has(tp) {
			t.Errorf("m1 lost a partition it could keep")
		}
	}
	if len(u2["m1"])+len(u2["m2"]) != 8 || len(u2["m1"]) != 4 {
		t.Errorf("uniform after a leave: %d %d", len(u2["m1"]), len(u2["m2"]))
	}
}

func TestConsumerGroupFollowsTopicChanges(t *testing.T) {
	h := newHarness(t)
	h.createTopic("events-1", 2)
	m := &sim{h: h, group: "g", id: "m", owned: partitionSet{}}
	m.apply(h.consumerJoin("g", "m", nil, func(r *ConsumerHeartbeatRequest) {
		r.SubscribedTopicNames = nil
		r.SubscribedTopicRegex = ptr("events-.*")
	}))
	if len(m.owned) != 2 {
		t.Fatalf("regex member owns %d", len(m.owned))
	}
	h.createTopic("events-2", 3)
	h.createTopic("other", 3)
	m.mustBeat(t)
	if len(m.owned) != 5 {
		t.Fatalf("after a matching topic appeared the member owns %d, want 5", len(m.owned))
	}
	if err := h.b.CreatePartitions("events-1", 4, false); err != nil {
		t.Fatal(err)
	}
	m.mustBeat(t)
	if len(m.owned) != 7 {
		t.Fatalf("after partitions were added the member owns %d, want 7", len(m.owned))
	}
	d := h.describeConsumer("g")
	if d.Err != nil || d.State != "Stable" || d.Assignor != "uniform" || len(d.Members) != 1 || d.Members[0].SubscribedRegex == nil || len(d.Members[0].Assignment) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	classic := h.c.DescribeGroups([]string{"g"})[0]
	if classic.ProtocolType != "consumer" || len(classic.Members) != 1 || len(classic.Members[0].Assignment) == 0 {
		t.Fatalf("classic view of a consumer group: %+v", classic)
	}
}

func TestGroupKindsDoNotMix(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 1)
	h.stableGroup("classic", 1)
	r := h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{Group: "classic", MemberID: "x", SubscribedTopicNames: []string{"t"}, RebalanceTimeout: time.Second, Owned: []TopicPartitions{}})
	if !errors.Is(r.Err, ErrGroupIDNotFound) {
		t.Fatalf("KIP-848 join of a classic group with members: %v", r.Err)
	}
	h.newSim("next", "m", "t")
	j := h.join(JoinRequest{Group: "next"}).must(t)
	if !errors.Is(j.Err, ErrInconsistentGroupProtocol) {
		t.Fatalf("classic join of a consumer group with members: %v", j.Err)
	}
	if d := h.describeConsumer("classic"); !errors.Is(d.Err, ErrGroupIDNotFound) {
		t.Fatalf("ConsumerGroupDescribe of a classic group: %v", d.Err)
	}
	// Once empty, a group may change kind, keeping its offsets.
	commitOne(h, CommitRequest{Group: "next", MemberID: "m", Generation: 1, Offsets: []OffsetCommit{{Topic: "t", Offset: 3}}})
	h.c.ConsumerGroupHeartbeat(ConsumerHeartbeatRequest{Group: "next", MemberID: "m", MemberEpoch: -1})
	id, p := h.joinNew("next")
	if r := p.must(t); r.Err != nil {
		t.Fatalf("classic join of the emptied consumer group: %v (%s)", r.Err, id)
	}
	if got, _ := h.c.FetchOffsets(FetchRequest{Group: "next"}); len(got) != 1 || got[0].Offset != 3 {
		t.Fatalf("offsets after the group changed kind: %+v", got)
	}
	h.restart()
	if l := h.c.ListGroups(nil, nil); len(l) != 2 || l[1].Group != "next" || l[1].Type != "classic" {
		t.Fatalf("after restart: %+v", l)
	}
}

func TestConsumerGroupSurvivesRestartAsEmpty(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 1)
	m := h.newSim("g", "m", "t")
	commitOne(h, CommitRequest{Group: "g", MemberID: "m", Generation: m.epoch, Offsets: []OffsetCommit{{Topic: "t", Offset: 3}}})
	h.restart()
	l := h.c.ListGroups(nil, nil)
	if len(l) != 1 || l[0].Type != "consumer" || l[0].State != "Empty" {
		t.Fatalf("after restart: %+v", l)
	}
	if r := m.beat(); !errors.Is(r.Err, ErrUnknownMemberID) {
		t.Fatalf("heartbeat after restart: %v, want UNKNOWN_MEMBER_ID (members rejoin)", r.Err)
	}
	m2 := h.newSim("g", "m", "t")
	if m2.epoch <= m.epoch {
		t.Fatalf("epoch after restart %d, before %d: epochs must keep growing", m2.epoch, m.epoch)
	}
}
