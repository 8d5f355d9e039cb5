package quota

import (
	"errors"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/kvtest"
)

func mustOpen(t *testing.T, kv KV) *Manager {
	t.Helper()
	m, err := Open(kv)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func set(t *testing.T, m *Manager, e Entity, key string, v float64) {
	t.Helper()
	if err := m.Alter(e, map[string]float64{key: v}, nil, false); err != nil {
		t.Fatal(err)
	}
}

// TestPrecedence: the most specific entity that sets a key wins, in
// Kafka's order, and decides who shares the measuring.
func TestPrecedence(t *testing.T) {
	m := mustOpen(t, kvtest.New())
	set(t, m, Entity{ClientID: DefaultPart}, ProducerByteRate, 8)
	set(t, m, Entity{ClientID: Named("app")}, ProducerByteRate, 7)
	set(t, m, Entity{User: DefaultPart}, ProducerByteRate, 6)
	set(t, m, Entity{User: Named("alice")}, ProducerByteRate, 3)
	set(t, m, Entity{User: Named("alice"), ClientID: Named("app")}, ProducerByteRate, 1)
	set(t, m, Entity{User: Named("alice"), ClientID: DefaultPart}, ConsumerByteRate, 2)
	for _, c := range []struct {
		key, user, client string
		want              float64
		tags              sensorKey
	}{
		{ProducerByteRate, "alice", "app", 1, sensorKey{ProducerByteRate, "alice", "app"}},
		{ProducerByteRate, "alice", "other", 3, sensorKey{ProducerByteRate, "alice", ""}},
		{ProducerByteRate, "bob", "app", 6, sensorKey{ProducerByteRate, "bob", ""}},
		{ConsumerByteRate, "alice", "other", 2, sensorKey{ConsumerByteRate, "alice", "other"}},
	} {
		got, tags, ok := m.limit(c.key, c.user, c.client)
		if !ok || got != c.want || tags != c.tags {
			t.Errorf("%s for %s/%s: %v %+v %v, want %v %+v", c.key, c.user, c.client, got, tags, ok, c.want, c.tags)
		}
	}
	if err := m.Alter(Entity{User: DefaultPart}, nil, []string{ProducerByteRate}, false); err != nil {
		t.Fatal(err)
	}
	if got, tags, _ := m.limit(ProducerByteRate, "bob", "app"); got != 7 || tags != (sensorKey{ProducerByteRate, "", "app"}) {
		t.Errorf("without the user default, bob/app: %v %+v, want the client-id quota 7 shared by client id", got, tags)
	}
	if _, _, ok := m.limit(RequestPercentage, "bob", "app"); ok {
		t.Error("a key nobody set has a quota")
	}
}

// TestThrottleFollowsKafkasFormula: the throttle is (rate - quota) /
// quota times the measuring span, at least 10 windows for a new client.
func TestThrottleFollowsKafkasFormula(t *testing.T) {
	m := mustOpen(t, kvtest.New())
	set(t, m, Entity{User: Named("alice")}, ProducerByteRate, 1000)
	now := time.Unix(1_700_000_000, 0)
	if d := m.Record(ProducerByteRate, "alice", "c", 5000, now); d != 0 {
		t.Fatalf("5000 bytes averaged over 10 s is within 1000/s, yet throttled %v", d)
	}
	// 20,000 bytes in all over 10.5 s: 1905/s, 0.905 over, times 10.5 s.
	d := m.Record(ProducerByteRate, "alice", "c", 15000, now.Add(500*time.Millisecond))
	if want := 9500 * time.Millisecond; d < want-10*time.Millisecond || d > want+10*time.Millisecond {
		t.Fatalf("throttled %v, want about %v", d, want)
	}
	if d := m.Record(ProducerByteRate, "bob", "c", 1e9, now); d != 0 {
		t.Fatalf("a user without a quota was throttled %v", d)
	}
	// Outside the 11 windows the old bytes no longer count.
	if d := m.Record(ProducerByteRate, "alice", "c", 1, now.Add(12*time.Second)); d != 0 {
		t.Fatalf("throttled %v after the window passed", d)
	}

	set(t, m, Entity{User: DefaultPart}, RequestPercentage, 10)
	if d := m.Record(RequestPercentage, "carol", "c", RequestPercentageOf(30*time.Second), now); d != time.Second {
		t.Fatalf("request quota throttle %v, want capped at one window", d)
	}
}

func TestQuotasPersistAndDescribe(t *testing.T) {
	kv := kvtest.New()
	m := mustOpen(t, kv)
	set(t, m, Entity{User: Named("alice")}, ProducerByteRate, 1024)
	set(t, m, Entity{User: Named("alice"), ClientID: Named("app")}, ConsumerByteRate, 2048)
	set(t, m, Entity{User: DefaultPart}, RequestPercentage, 50)
	set(t, m, Entity{ClientID: DefaultPart}, ProducerByteRate, 10)
	m = mustOpen(t, kv)

	count := func(parts []FilterPart, strict bool) int {
		t.Helper()
		got, err := m.Describe(parts, strict)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	for _, c := range []struct {
		parts  []FilterPart
		strict bool
		want   int
	}{
		{nil, false, 4},
		{nil, true, 0},
		{[]FilterPart{{Type: TypeUser, Match: MatchExact, Name: "alice"}}, false, 2},
		{[]FilterPart{{Type: TypeUser, Match: MatchExact, Name: "alice"}}, true, 1},
		{[]FilterPart{{Type: TypeUser, Match: MatchDefault}}, false, 1},
		{[]FilterPart{{Type: TypeUser, Match: MatchAny}}, true, 2},
		{[]FilterPart{{Type: TypeClientID, Match: MatchAny}}, false, 2},
	} {
		if got := count(c.parts, c.strict); got != c.want {
			t.Errorf("filter %+v strict %v: %d entities, want %d", c.parts, c.strict, got, c.want)
		}
	}
	if _, err := m.Describe([]FilterPart{{Type: TypeUser}, {Type: TypeUser}}, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("duplicate filter type: %v", err)
	}
}

func TestValidation(t *testing.T) {
	name := func(s string) *string { return &s }
	for _, pairs := range [][]EntityPair{
		nil,
		{{Type: "group", Name: name("g")}},
		{{Type: TypeUser, Name: name("a")}, {Type: TypeUser, Name: name("b")}},
		{{Type: TypeUser, Name: name("")}},
		{{Type: TypeIP, Name: name("1.2.3.4")}},
	} {
		if _, err := ParseEntity(pairs); !errors.Is(err, ErrInvalid) {
			t.Errorf("entity %+v: %v", pairs, err)
		}
	}
	e, err := ParseEntity([]EntityPair{{Type: TypeUser}, {Type: TypeClientID, Name: name("app")}})
	if err != nil || e != (Entity{User: DefaultPart, ClientID: Named("app")}) {
		t.Fatalf("%+v %v", e, err)
	}
	m := mustOpen(t, kvtest.New())
	for key, v := range map[string]float64{"controller_mutation_rate": 1, ProducerByteRate: 1.5, "bogus": 1} {
		if err := m.Alter(e, map[string]float64{key: v}, nil, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s=%v: %v", key, v, err)
		}
	}
	if err := m.Alter(e, map[string]float64{RequestPercentage: 12.5}, nil, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Describe(nil, false); len(got) != 0 {
		t.Fatal("validate-only stored a quota")
	}
}

// TestManagersFollowEachOtherAsNodes: two managers over one metadata log
// (two nodes of a cluster). A quota set on one throttles on the other
// once it applies it; a quota altered on a node that has not applied the
// entity's other quotas yet keeps them.
func TestManagersFollowEachOtherAsNodes(t *testing.T) {
	log := kvtest.New()
	node1, node2 := log.Node(), log.Node()
	m1, m2 := mustOpen(t, node1), mustOpen(t, node2)
	alice := Entity{User: Named("alice")}

	set(t, m1, alice, ProducerByteRate, 1000)
	node2.CatchUp() // as it applies the log
	now := time.Now()
	if d := m2.Record(ProducerByteRate, "alice", "c", 1e6, now); d == 0 {
		t.Fatal("node 2 does not throttle alice past the quota node 1 set")
	}

	set(t, m1, alice, ConsumerByteRate, 2000)
	set(t, m2, alice, RequestPercentage, 50)
	node1.CatchUp()
	got, err := m1.Describe([]FilterPart{{Type: TypeUser, Match: MatchExact, Name: "alice"}}, true)
	if err != nil || len(got) != 1 || len(got[0].Values) != 3 {
		t.Fatalf("alice's quotas after both nodes set some: %+v %v, want all three", got, err)
	}
}
