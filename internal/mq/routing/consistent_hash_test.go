package routing

import (
	"fmt"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func hashTable(t *testing.T, weights map[string]string, order []string) *Table[string] {
	t.Helper()
	tab := NewTable[string](ConsistentHash)
	for _, d := range order {
		if _, err := tab.Add(Binding[string]{Dest: d, Key: weights[d]}); err != nil {
			t.Fatalf("Add(%s): %v", d, err)
		}
	}
	return tab
}

func routeOne(t *testing.T, tab *Table[string], value string) string {
	t.Helper()
	var got []string
	tab.Route(value, nil, func(d string) { got = append(got, d) })
	if len(got) != 1 {
		t.Fatalf("value %q routed to %v, want exactly one destination", value, got)
	}
	return got[0]
}

func TestConsistentHashDistributionFollowsWeights(t *testing.T) {
	tab := hashTable(t, map[string]string{"q1": "100", "q2": "100", "q3": "100", "q4": "200"},
		[]string{"q1", "q2", "q3", "q4"})
	const n = 20000
	counts := map[string]int{}
	for i := range n {
		counts[routeOne(t, tab, fmt.Sprintf("order-%d", i))]++
	}
	// Expected shares 1/5, 1/5, 1/5, 2/5; allow 15% relative error.
	want := map[string]float64{"q1": 0.2, "q2": 0.2, "q3": 0.2, "q4": 0.4}
	for d, share := range want {
		got := float64(counts[d]) / n
		if got < share*0.85 || got > share*1.15 {
			t.Errorf("%s got %.3f of the keys, want about %.2f (counts %v)", d, got, share, counts)
		}
	}
}

func TestConsistentHashIsStable(t *testing.T) {
	weights := map[string]string{"a": "10", "b": "10", "c": "10", "d": "10"}
	tab := hashTable(t, weights, []string{"a", "b", "c", "d"})
	before := map[string]string{}
	for i := range 5000 {
		k := fmt.Sprintf("key-%d", i)
		before[k] = routeOne(t, tab, k)
		if again := routeOne(t, tab, k); again != before[k] {
			t.Fatalf("key %s went to %s, then to %s", k, before[k], again)
		}
	}
	// A table built the same way routes the same (the hash is not seeded
	// per process).
	twin := hashTable(t, weights, []string{"a", "b", "c", "d"})
	for k, d := range before {
		if got := routeOne(t, twin, k); got != d {
			t.Fatalf("twin table sends %s to %s, original to %s", k, got, d)
		}
	}
	// Adding a destination moves keys only to it, and about its share.
	if _, err := tab.Add(Binding[string]{Dest: "e", Key: "10"}); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for k, d := range before {
		got := routeOne(t, tab, k)
		if got != d {
			if got != "e" {
				t.Fatalf("key %s moved from %s to %s, not to the new destination", k, d, got)
			}
			moved++
		}
	}
	if moved < 700 || moved > 1300 { // 1/5 of 5000 = 1000
		t.Errorf("%d of 5000 keys moved to the new destination, want about 1000", moved)
	}
	// Removing it puts every key back.
	if !tab.Remove(Binding[string]{Dest: "e", Key: "10"}) {
		t.Fatal("Remove failed")
	}
	for k, d := range before {
		if got := routeOne(t, tab, k); got != d {
			t.Fatalf("after removal key %s goes to %s, want %s", k, got, d)
		}
	}
}

func TestConsistentHashBindingKeys(t *testing.T) {
	for key, want := range map[string]string{
		"abc": `The binding key must be an integer: <<"abc">>`,
		"":    `The binding key must be an integer: <<"">>`,
		"0":   "The binding key must be greater than 0",
		"-3":  "The binding key must be greater than 0",
	} {
		err := Validate(ConsistentHash, key, nil)
		if err == nil || err.Error() != want {
			t.Errorf("Validate(%q) = %v, want %q", key, err, want)
		}
	}
	if err := Validate(ConsistentHash, "99999999999999999999999", nil); err != nil {
		t.Errorf("huge weight: %v", err)
	}
	// A destination bound twice keeps its first binding's buckets: with
	// a:1 then b:1 then a:1000, a still owns one bucket of two.
	tab := NewTable[string](ConsistentHash)
	for _, b := range []Binding[string]{{Dest: "a", Key: "1"}, {Dest: "b", Key: "1"}, {Dest: "a", Key: "1000"}} {
		if _, err := tab.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	if tab.Len() != 3 || len(tab.ring) != 2 || tab.ring[1].end != 2 {
		t.Fatalf("ring %+v (len %d), want two runs of one bucket", tab.ring, tab.Len())
	}
	var none []string
	NewTable[string](ConsistentHash).Route("k", nil, func(d string) { none = append(none, d) })
	if len(none) != 0 {
		t.Fatalf("empty table routed to %v", none)
	}
}

func TestHashOn(t *testing.T) {
	if _, err := ParseHashOn(amqpwire.Table{"hash-header": "h", "hash-property": "message_id"}); err == nil ||
		err.Error() != "hash-header and hash-property are mutually exclusive" {
		t.Errorf("both: %v", err)
	}
	if _, err := ParseHashOn(amqpwire.Table{"hash-property": "app_id"}); err == nil || err.Error() != "Unsupported property: app_id" {
		t.Errorf("bad property: %v", err)
	}
	p := &amqpwire.Properties{
		Headers:   amqpwire.Table{"user": int32(42), "name": []byte("ann")},
		MessageID: "m-1",
		Timestamp: time.Unix(1700000000, 0),
	}
	cases := []struct {
		args amqpwire.Table
		want string
	}{
		{nil, "rk"},
		{amqpwire.Table{"hash-header": "user"}, "42"},
		{amqpwire.Table{"hash-header": "name"}, "ann"},
		{amqpwire.Table{"hash-header": "missing"}, absentHashValue},
		{amqpwire.Table{"hash-property": "message_id"}, "m-1"},
		{amqpwire.Table{"hash-property": "correlation_id"}, absentHashValue},
		{amqpwire.Table{"hash-property": "timestamp"}, "1700000000"},
	}
	for _, c := range cases {
		h, err := ParseHashOn(c.args)
		if err != nil {
			t.Fatalf("ParseHashOn(%v): %v", c.args, err)
		}
		if got := h.Value("rk", p); got != c.want {
			t.Errorf("Value with %v = %q, want %q", c.args, got, c.want)
		}
	}
	// An int64 header hashes as the same int32 value does.
	h, _ := ParseHashOn(amqpwire.Table{"hash-header": "user"})
	if h.Value("", &amqpwire.Properties{Headers: amqpwire.Table{"user": int64(42)}}) != "42" {
		t.Error("integer widths hash differently")
	}
}
