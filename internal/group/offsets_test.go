package group

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

func commitOne(h *harness, req CommitRequest) error {
	return h.c.CommitOffsets(req)[0]
}

func TestCommitRules(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 2)
	ids, gen := h.stableGroup("g", 1)
	oc := []OffsetCommit{{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: 3, Metadata: "md"}}

	if err := commitOne(h, CommitRequest{Group: "g", Generation: gen, MemberID: ids[0], Offsets: oc}); err != nil {
		t.Fatalf("member commit: %v", err)
	}
	cases := []struct {
		name string
		req  CommitRequest
		want error
	}{
		{"wrong generation", CommitRequest{Group: "g", Generation: gen + 1, MemberID: ids[0]}, ErrIllegalGeneration},
		{"unknown member", CommitRequest{Group: "g", Generation: gen, MemberID: "x"}, ErrUnknownMemberID},
		{"admin while members", CommitRequest{Group: "g", Generation: -1}, ErrUnknownMemberID},
		{"unknown group as member", CommitRequest{Group: "nope", Generation: 1, MemberID: "x"}, ErrIllegalGeneration},
	}
	for _, c := range cases {
		c.req.Offsets = oc
		if err := commitOne(h, c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	res := h.c.CommitOffsets(CommitRequest{Group: "g", Generation: gen, MemberID: ids[0], Offsets: []OffsetCommit{
		{Topic: "t", Partition: 1, Offset: 9},
		{Topic: "t", Partition: 7, Offset: 1},
		{Topic: "missing", Partition: 0, Offset: 1},
		{Topic: "t", Partition: 0, Offset: 1, Metadata: strings.Repeat("x", 5000)},
	}})
	if res[0] != nil || !errors.Is(res[1], ErrUnknownTopicOrPartition) || !errors.Is(res[2], ErrUnknownTopicOrPartition) || !errors.Is(res[3], ErrOffsetMetadataTooLarge) {
		t.Fatalf("mixed commit: %v", res)
	}

	got, err := h.c.FetchOffsets(FetchRequest{Group: "g", Partitions: []TopicPartition{{"t", 0}, {"t", 1}, {"other", 0}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []FetchedOffset{{"t", 0, 5, 3, "md", nil}, {"t", 1, 9, 0, "", nil}, {"other", 0, -1, -1, "", nil}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("fetch %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	all, _ := h.c.FetchOffsets(FetchRequest{Group: "g"})
	if len(all) != 2 || all[0].Partition != 0 || all[1].Partition != 1 {
		t.Errorf("fetch all: %+v", all)
	}
	none, err := h.c.FetchOffsets(FetchRequest{Group: "unknown", Partitions: []TopicPartition{{"t", 0}}})
	if err != nil || none[0].Offset != -1 {
		t.Errorf("fetch of an unknown group: %+v %v", none, err)
	}
}

func TestCommitDuringCompletingRebalanceIsRefused(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 1)
	id, p := h.joinNew("g")
	r := p.must(t)
	err := commitOne(h, CommitRequest{Group: "g", Generation: r.Generation, MemberID: id, Offsets: []OffsetCommit{{Topic: "t", Offset: 1}}})
	if !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("commit while completing the rebalance: %v", err)
	}
}

func TestAdminCommitCreatesSimpleGroup(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 1)
	if err := commitOne(h, CommitRequest{Group: "tool", Generation: -1, Offsets: []OffsetCommit{{Topic: "t", Offset: 4}}}); err != nil {
		t.Fatal(err)
	}
	g := h.c.ListGroups(nil, nil)
	if len(g) != 1 || g[0].Group != "tool" || g[0].State != "Empty" || g[0].ProtocolType != "" || g[0].Type != "classic" {
		t.Fatalf("list: %+v", g)
	}
}

func TestOffsetsAndGroupsSurviveRestart(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 3)
	ids, gen := h.stableGroup("g", 2)
	for p := range int32(3) {
		if err := commitOne(h, CommitRequest{Group: "g", Generation: gen, MemberID: ids[0], Offsets: []OffsetCommit{{Topic: "t", Partition: p, Offset: int64(10 * (p + 1)), LeaderEpoch: -1}}}); err != nil {
			t.Fatal(err)
		}
	}
	// A later commit of the same partition wins; a deleted offset stays
	// deleted.
	commitOne(h, CommitRequest{Group: "g", Generation: gen, MemberID: ids[0], Offsets: []OffsetCommit{{Topic: "t", Partition: 0, Offset: 11}}})
	commitOne(h, CommitRequest{Group: "solo", Generation: -1, Offsets: []OffsetCommit{{Topic: "t", Partition: 2, Offset: 1}}})
	if res, err := h.c.DeleteOffsets("solo", []TopicPartition{{"t", 2}}); err != nil || res[0] != nil {
		t.Fatalf("delete offsets: %v %v", res, err)
	}

	h.restart()

	got, _ := h.c.FetchOffsets(FetchRequest{Group: "g"})
	if len(got) != 3 || got[0].Offset != 11 || got[1].Offset != 20 || got[2].Offset != 30 {
		t.Fatalf("offsets after restart: %+v", got)
	}
	if h.classicState("g") != classicStable || h.generation("g") != gen {
		t.Fatalf("group after restart: %s generation %d, want Stable %d", h.classicState("g"), h.generation("g"), gen)
	}
	for _, id := range ids {
		if err := h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: id}); err != nil {
			t.Fatalf("heartbeat of %s after restart: %v", id, err)
		}
	}
	d := h.c.DescribeGroups([]string{"g"})[0]
	if len(d.Members) != 2 || string(d.Members[0].Assignment) != "a-"+d.Members[0].MemberID {
		t.Fatalf("members after restart: %+v", d.Members)
	}
	if s, _ := h.c.FetchOffsets(FetchRequest{Group: "solo"}); len(s) != 0 {
		t.Fatalf("deleted offset came back: %+v", s)
	}
	if gs := h.c.ListGroups(nil, nil); len(gs) != 1 {
		t.Fatalf("groups after restart: %+v (the emptied simple group should be gone)", gs)
	}
	// Restored members that never come back expire.
	h.advance(11 * time.Second)
	if got := h.classicState("g"); got != classicEmpty {
		t.Fatalf("state %s after the restored members' sessions ran out", got)
	}
}

func TestEmptyGroupOffsetsExpire(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.OffsetsRetention = time.Hour })
	h.createTopic("t", 1)
	ids, gen := h.stableGroup("g", 1)
	commitOne(h, CommitRequest{Group: "g", Generation: gen, MemberID: ids[0], Offsets: []OffsetCommit{{Topic: "t", Offset: 7}}})
	// While the group has members nothing expires.
	h.clock.add(2 * time.Hour)
	h.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[0]})
	h.c.expireOffsets(h.clock.Now())
	if got, _ := h.c.FetchOffsets(FetchRequest{Group: "g"}); len(got) != 1 {
		t.Fatalf("offsets of an active group expired: %+v", got)
	}
	h.c.LeaveGroup("g", []LeavingMember{{MemberID: ids[0]}})
	h.clock.add(59 * time.Minute)
	h.c.expireOffsets(h.clock.Now())
	if got, _ := h.c.FetchOffsets(FetchRequest{Group: "g"}); len(got) != 1 {
		t.Fatalf("offsets expired before the retention: %+v", got)
	}
	h.clock.add(time.Minute)
	h.c.expireOffsets(h.clock.Now())
	if got, _ := h.c.FetchOffsets(FetchRequest{Group: "g"}); len(got) != 0 {
		t.Fatalf("offsets kept past the retention: %+v", got)
	}
	if gs := h.c.ListGroups(nil, nil); len(gs) != 0 {
		t.Fatalf("an expired empty group is still listed: %+v", gs)
	}
	h.restart()
	if got, _ := h.c.FetchOffsets(FetchRequest{Group: "g"}); len(got) != 0 {
		t.Fatalf("expired offsets came back after a restart: %+v", got)
	}
}

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 1)
	h.stableGroup("busy", 1)
	commitOne(h, CommitRequest{Group: "idle", Generation: -1, Offsets: []OffsetCommit{{Topic: "t", Offset: 1}}})
	res := h.c.DeleteGroups([]string{"busy", "idle", "ghost"})
	if !errors.Is(res[0], ErrNonEmptyGroup) || res[1] != nil || !errors.Is(res[2], ErrGroupIDNotFound) {
		t.Fatalf("delete: %v", res)
	}
	h.restart()
	if got, _ := h.c.FetchOffsets(FetchRequest{Group: "idle"}); len(got) != 0 {
		t.Fatalf("offsets of a deleted group after restart: %+v", got)
	}
	if gs := h.c.ListGroups(nil, nil); len(gs) != 1 || gs[0].Group != "busy" {
		t.Fatalf("groups: %+v", gs)
	}
}

func TestOffsetDeleteKeepsSubscribedTopics(t *testing.T) {
	h := newHarness(t)
	h.createTopic("sub", 1)
	h.createTopic("old", 1)
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"sub"}
	id, p := h.joinNew("g", func(r *JoinRequest) { r.Protocols = []Protocol{{Name: "range", Metadata: meta.AppendTo(nil)}} })
	gen := h.syncAll("g", []string{id}, map[string]pending[JoinResponse]{id: p})
	h.c.CommitOffsets(CommitRequest{Group: "g", Generation: gen, MemberID: id, Offsets: []OffsetCommit{{Topic: "sub", Offset: 1}, {Topic: "old", Offset: 2}}})
	res, err := h.c.DeleteOffsets("g", []TopicPartition{{"sub", 0}, {"old", 0}, {"gone", 0}})
	if err != nil || !errors.Is(res[0], ErrGroupSubscribedToTopic) || res[1] != nil || !errors.Is(res[2], ErrUnknownTopicOrPartition) {
		t.Fatalf("offset delete: %v %v", res, err)
	}
	got, _ := h.c.FetchOffsets(FetchRequest{Group: "g"})
	if len(got) != 1 || got[0].Topic != "sub" {
		t.Fatalf("offsets left: %+v", got)
	}
	if _, err := h.c.DeleteOffsets("nope", nil); !errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("offset delete of an unknown group: %v", err)
	}
}

func TestListGroupsFilters(t *testing.T) {
	h := newHarness(t)
	h.createTopic("t", 1)
	h.stableGroup("stable", 1)
	commitOne(h, CommitRequest{Group: "empty", Generation: -1, Offsets: []OffsetCommit{{Topic: "t", Offset: 1}}})
	h.consumerJoin("next", "m1", []string{"t"})
	names := func(gs []ListedGroup) (out []string) {
		for _, g := range gs {
			out = append(out, g.Group)
		}
		return out
	}
	if got := names(h.c.ListGroups([]string{"stable"}, nil)); len(got) != 2 || got[0] != "next" || got[1] != "stable" {
		t.Errorf("states=stable: %v", got)
	}
	if got := names(h.c.ListGroups([]string{"Empty"}, nil)); len(got) != 1 || got[0] != "empty" {
		t.Errorf("states=Empty: %v", got)
	}
	if got := names(h.c.ListGroups(nil, []string{"consumer"})); len(got) != 1 || got[0] != "next" {
		t.Errorf("types=consumer: %v", got)
	}
}

func TestLag(t *testing.T) {
	h := newHarness(t)
	tp := h.createTopic("t", 1)
	p, _ := tp.Partition(0)
	base := h.clock.Now().Add(-time.Hour)
	for i := range 10 {
		produceAt(t, p, base.Add(time.Duration(i)*time.Minute))
	}
	commitOne(h, CommitRequest{Group: "g", Generation: -1, Offsets: []OffsetCommit{{Topic: "t", Offset: 4}}})
	lags, err := h.c.Lag("g")
	if err != nil || len(lags) != 1 {
		t.Fatalf("lag: %+v %v", lags, err)
	}
	l := lags[0]
	if l.End != 10 || l.Lag != 6 || !l.NextTimestamp.Equal(base.Add(4*time.Minute)) || l.TimeLag != 56*time.Minute {
		t.Fatalf("lag: %+v", l)
	}
	lags, err = h.c.RecordLag("g")
	if err != nil || len(lags) != 1 || lags[0].Lag != 6 || !lags[0].NextTimestamp.IsZero() {
		t.Fatalf("record lag: %+v %v", lags, err)
	}
}

// TestOffsetsSurviveCompaction commits the same partitions many times and
// deletes a group, lets the log cleaner compact __consumer_offsets, and
// checks that a restart rebuilds exactly the latest state.
func TestOffsetsSurviveCompaction(t *testing.T) {
	h := newHarnessWith(t, func(b *broker.Broker) {
		_, err := b.CreateInternalTopic(broker.TopicSpec{Name: OffsetsTopic, Partitions: 1, Configs: map[string]string{
			"cleanup.policy": "compact", "segment.bytes": "2048", "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01",
		}})
		if err != nil {
			t.Fatal(err)
		}
	})
	h.createTopic("t", 4)
	for i := range 200 {
		var oc []OffsetCommit
		for p := range int32(4) {
			oc = append(oc, OffsetCommit{Topic: "t", Partition: p, Offset: int64(i*10) + int64(p), LeaderEpoch: -1})
		}
		for _, err := range h.c.CommitOffsets(CommitRequest{Group: "g", Generation: -1, Offsets: oc}) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	commitOne(h, CommitRequest{Group: "gone", Generation: -1, Offsets: []OffsetCommit{{Topic: "t", Offset: 5}}})
	if err := h.c.DeleteGroups([]string{"gone"})[0]; err != nil {
		t.Fatal(err)
	}
	offsets, _ := h.b.Topic(OffsetsTopic)
	p, _ := offsets.Partition(0)
	before := p.Size()
	for range 2 {
		if err := h.b.CompactNow(); err != nil {
			t.Fatal(err)
		}
	}
	if after := p.Size(); after > before/4 {
		t.Fatalf("__consumer_offsets is %d bytes after compaction, %d before: nothing was cleaned", after, before)
	}
	h.restart()
	got, _ := h.c.FetchOffsets(FetchRequest{Group: "g"})
	if len(got) != 4 {
		t.Fatalf("offsets after compaction and restart: %+v", got)
	}
	for _, o := range got {
		if o.Offset != int64(1990)+int64(o.Partition) {
			t.Errorf("partition %d at %d, want %d", o.Partition, o.Offset, 1990+int64(o.Partition))
		}
	}
	if l := h.c.ListGroups(nil, nil); len(l) != 1 || l[0].Group != "g" {
		t.Fatalf("groups after compaction and restart: %+v", l)
	}
}

// TestLagOfAPartitionWithoutAReplicaHereIsUnknown: a partition this
// node cannot read (offline here, or in a cluster held by other nodes)
// has no end offset here; its lag was reported as 0 however far the
// group was behind. It is unknown, and says so.
func TestLagOfAPartitionWithoutAReplicaHereIsUnknown(t *testing.T) {
	h := newHarness(t)
	tp := h.createTopic("t", 1)
	p, _ := tp.Partition(0)
	for range 3 {
		produceAt(t, p, h.clock.Now())
	}
	commitOne(h, CommitRequest{Group: "g", Generation: -1, Offsets: []OffsetCommit{{Topic: "t", Offset: 1}}})
	h.c.Close()
	if err := h.b.Close(); err != nil {
		t.Fatal(err)
	}
	// Its data gone, the partition stays offline at the next start.
	if err := os.RemoveAll(filepath.Join(h.dir, "t-0")); err != nil {
		t.Fatal(err)
	}
	h.restartOpened()

	lags, err := h.c.RecordLag("g")
	if err != nil || len(lags) != 1 {
		t.Fatalf("lag: %+v %v", lags, err)
	}
	if l := lags[0]; l.Err == nil || l.Lag != -1 || l.End != -1 {
		t.Fatalf("lag of an offline partition: %+v, want unknown (-1, with an error)", l)
	}
}
