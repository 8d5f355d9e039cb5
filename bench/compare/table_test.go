package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var samples latencies
	for i := 100; i >= 1; i-- { // unsorted on purpose
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.50, 50 * time.Millisecond},
		{0.99, 99 * time.Millisecond},
		{0.999, 100 * time.Millisecond},
		{1, 100 * time.Millisecond},
		{0.001, 1 * time.Millisecond},
	} {
		if got := percentile(samples, tc.q); got != tc.want {
			t.Errorf("percentile(1..100 ms, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(nil) = %v, want 0", got)
	}
	if got := percentile(latencies{7}, 0.99); got != 7 {
		t.Errorf("percentile of one sample = %v, want 7", got)
	}
}

func TestMergeKeepsEverySample(t *testing.T) {
	m := merge(latencies{3, 1}, nil, latencies{2})
	if len(m) != 3 || percentile(m, 1) != 3 || percentile(m, 0.01) != 1 {
		t.Errorf("merge = %v", m)
	}
}

func TestMedian(t *testing.T) {
	xs := []float64{5, 1, 3}
	if got := median(xs); got != 3 {
		t.Errorf("median odd = %v, want 3", got)
	}
	if xs[0] != 5 {
		t.Error("median reordered its input")
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median even = %v, want 2.5", got)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing should be NaN")
	}
}

func TestMedianFiguresPerKey(t *testing.T) {
	got := medianFigures([]figures{{"rate": 10, "p99": 9}, {"rate": 30, "p99": 1}, {"rate": 20}})
	if got["rate"] != 20 || got["p99"] != 5 {
		t.Errorf("medianFigures = %v, want rate 20, p99 5", got)
	}
}

func TestFormatNumber(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{1234567.4, "1,234,567"},
		{1000, "1,000"},
		{999.4, "999"},
		{12.345, "12.3"},
		{1.2345, "1.23"},
		{0.012345, "0.0123"},
		{0, "0"},
		{-2500, "-2,500"},
		{math.NaN(), "—"},
	} {
		if got := formatNumber(tc.v); got != tc.want {
			t.Errorf("formatNumber(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	if got := formatFigure(37, fileCount); got != "37 fds" {
		t.Errorf("formatFigure(37, fileCount) = %q", got)
	}
}

func TestRatioAndWhoIsBehind(t *testing.T) {
	throughput := row{Unit: msgsPerSec, Wharf: 200, PeerValue: 100}
	if throughput.ratio() != 2 || throughput.wharfBehind() {
		t.Errorf("throughput 200 vs 100: ratio %v, behind %v", throughput.ratio(), throughput.wharfBehind())
	}
	latency := row{Unit: msLatency, Wharf: 20, PeerValue: 10}
	if latency.ratio() != 2 || !latency.wharfBehind() {
		t.Errorf("latency 20 vs 10 ms: ratio %v, behind %v", latency.ratio(), latency.wharfBehind())
	}
	missing := row{Unit: msgsPerSec, Wharf: 5, PeerValue: math.NaN()}
	if !math.IsNaN(missing.ratio()) || missing.wharfBehind() {
		t.Error("a missing peer figure must give no ratio and no verdict")
	}
	zero := row{Unit: msgsPerSec, Wharf: 5, PeerValue: 0}
	if !math.IsNaN(zero.ratio()) {
		t.Error("a zero peer figure must give no ratio")
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b strings.Builder
	err := writeMarkdown(&b, []row{
		{Workload: "AMQP x: throughput", Unit: msgsPerSec, Wharf: 20000, Peer: "RabbitMQ", PeerValue: 10000, Notes: "a|b"},
		{Workload: "AMQP x: p99", Unit: msLatency, Wharf: 4, Peer: "RabbitMQ", PeerValue: 2},
		{Workload: "no peer", Unit: msgsPerSec, Wharf: 1, PeerValue: math.NaN(), Notes: "peer skipped: not installed"},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("want header, rule and 3 rows, got %d lines:\n%s", len(lines), b.String())
	}
	want := []string{
		"| workload | Wharf | peer | peer figure | Wharf/peer | notes |",
		"|---|---:|---|---:|---:|---|",
		`| AMQP x: throughput | 20,000 msg/s | RabbitMQ | 10,000 msg/s | 2.00× | a\|b |`,
		"| AMQP x: p99 ↓ | 4.00 ms | RabbitMQ | 2.00 ms | 2.00× | **Wharf behind** |",
		"| no peer | 1.00 msg/s | — | — | — | peer skipped: not installed |",
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
}

func TestWindow(t *testing.T) {
	s := &suite{opts: options{warmup: time.Second, duration: 2 * time.Second}}
	w := s.newWindow()
	if w.contains(time.Now()) {
		t.Error("the warm-up is inside the window")
	}
	if !w.contains(w.start) || w.contains(w.end) || !w.contains(w.end.Add(-time.Nanosecond)) {
		t.Error("window should be [start, end)")
	}
	if w.seconds() != 2 {
		t.Errorf("seconds = %v, want 2", w.seconds())
	}
}

func TestStampRoundTrip(t *testing.T) {
	s := &suite{base: time.Now().Add(-time.Hour)}
	body := make([]byte, 16)
	at := s.base.Add(90 * time.Minute)
	s.stampAt(body, at)
	if got := s.stampTime(body); !got.Equal(at) {
		t.Errorf("stampTime = %v, want %v", got, at)
	}
	if got := s.stampTime(body[:4]); !got.IsZero() {
		t.Errorf("a body shorter than a stamp gave %v", got)
	}
}

func TestLimitRowsGetNoVerdict(t *testing.T) {
	r := row{Unit: mbPerSec, Wharf: 400, PeerValue: 900, Limit: true}
	if r.wharfBehind() {
		t.Error("a row against a physical limit must not be marked behind")
	}
	if r.ratio() != 400.0/900 {
		t.Errorf("ratio = %v", r.ratio())
	}
}

func TestTargetNote(t *testing.T) {
	for _, tc := range []struct {
		r    row
		want string
	}{
		{row{Unit: mbPerSec, Wharf: 90, PeerValue: 100, Target: 0.95}, "target ≥ 0.95×: **not met**"},
		{row{Unit: mbPerSec, Wharf: 95, PeerValue: 100, Target: 0.95}, "target ≥ 0.95×: met"},
		{row{Unit: msgsPerSec, Wharf: 5, PeerValue: math.NaN(), Target: 1}, "target ≥ 1×: not measured"},
		{row{Unit: msLatency, Wharf: 4, PeerValue: 5, Target: 1}, "target ≤ 1×: met"},
		{row{Unit: msgsPerSec, Wharf: 5, PeerValue: 1}, ""},
	} {
		if got := tc.r.targetNote(); got != tc.want {
			t.Errorf("%+v: targetNote = %q, want %q", tc.r, got, tc.want)
		}
	}
}
