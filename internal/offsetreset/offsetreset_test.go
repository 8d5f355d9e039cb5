package offsetreset

import (
	"errors"
	"testing"
	"time"
)

func TestISODurationAndDatetime(t *testing.T) {
	for in, want := range map[string]time.Duration{"PT1H": time.Hour, "PT30M": 30 * time.Minute, "P1DT12H": 36 * time.Hour, "PT0.5S": 500 * time.Millisecond, "P2D": 48 * time.Hour} {
		if got, err := ParseISODuration(in); err != nil || got != want {
			t.Errorf("ParseISODuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "P", "PT", "1H", "PT1X", "-PT1H"} {
		if _, err := ParseISODuration(bad); err == nil {
			t.Errorf("ParseISODuration(%q): no error", bad)
		}
	}
	utc, err := ParseDatetime("2026-10-20T09:00:00.000Z")
	if err != nil || !utc.Equal(time.Date(2026, 10, 20, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("zoned datetime: %v %v", utc, err)
	}
	local, err := ParseDatetime("2026-10-20T09:00:00.000")
	if err != nil || !local.Equal(time.Date(2026, 10, 20, 9, 0, 0, 0, time.Local)) {
		t.Errorf("local datetime: %v %v", local, err)
	}
}

// TestPlan checks every mode on a partition holding offsets 10 to 99
// (end 100) with 50 committed, and on one with nothing committed.
func TestPlan(t *testing.T) {
	now := time.Date(2026, 10, 20, 9, 0, 0, 0, time.UTC)
	committed := Partition{Topic: "t", Partition: 0, Committed: 50, Start: 10, End: 100, AtTime: 70}
	none := Partition{Topic: "t", Partition: 1, Committed: -1, Start: 10, End: 100, AtTime: -1}
	for _, c := range []struct {
		mode, value string
		want        [2]int64 // the new offsets of committed and none; -1: an error
	}{
		{"to-earliest", "", [2]int64{10, 10}},
		{"to-latest", "", [2]int64{100, 100}},
		{"to-offset", "5", [2]int64{10, 10}},
		{"to-offset", "60", [2]int64{60, 60}},
		{"to-offset", "500", [2]int64{100, 100}},
		{"shift-by", "-100", [2]int64{10, -1}},
		{"shift-by", "20", [2]int64{70, -1}},
		{"to-datetime", "2026-10-20T08:00:00Z", [2]int64{70, 100}},
		{"by-duration", "PT1H", [2]int64{70, 100}},
	} {
		m, err := ParseMode(c.mode, c.value, now)
		if err != nil {
			t.Fatalf("%s %s: %v", c.mode, c.value, err)
		}
		plan := Plan(m, []Partition{committed, none})
		for i, s := range plan {
			got := s.Next
			if s.Err != nil {
				got = -1
			}
			if got != c.want[i] || s.Current != []int64{50, -1}[i] {
				t.Errorf("%s %s, partition %d: current %d, next %d (%v); want next %d", c.mode, c.value, i, s.Current, s.Next, s.Err, c.want[i])
			}
		}
	}
	if m, _ := ParseMode("by-duration", "PT1H", now); m.Timestamp() != now.Add(-time.Hour).UnixMilli() {
		t.Errorf("by-duration timestamp %d", m.Timestamp())
	}
	if m, _ := ParseMode("to-latest", "", now); m.Timestamp() != -1 {
		t.Errorf("to-latest needs no timestamp, got %d", m.Timestamp())
	}
	for _, bad := range [][2]string{{"to-offset", "x"}, {"to-datetime", "yesterday"}, {"by-duration", "1h"}, {"to-nowhere", ""}} {
		if _, err := ParseMode(bad[0], bad[1], now); err == nil {
			t.Errorf("ParseMode(%q, %q): no error", bad[0], bad[1])
		}
	}
	lookupFailed := errors.New("no offsets")
	if s := Plan(Mode{name: "to-latest", timestamp: -1}, []Partition{{Err: lookupFailed}}); !errors.Is(s[0].Err, lookupFailed) {
		t.Errorf("a partition whose offsets failed: %v", s[0].Err)
	}
}

func TestCheckResettable(t *testing.T) {
	if err := CheckResettable("g", 0, "Empty"); err != nil {
		t.Fatal(err)
	}
	var live *LiveMembersError
	if err := CheckResettable("g", 2, "Stable"); !errors.As(err, &live) || live.Members != 2 {
		t.Fatalf("a group with members: %v", err)
	}
}
