package rate

import (
	"math"
	"testing"
	"time"
)

func sample(s *Sampler, at time.Time, values ...int64) []float64 {
	stats := make([]Stat, len(values))
	for i, v := range values {
		stats[i] = Stat{Name: "x", Value: v}
	}
	s.Sample(at, stats)
	rates := make([]float64, len(stats))
	for i, st := range stats {
		rates[i] = st.Rate
	}
	return rates
}

func TestSampler(t *testing.T) {
	var s Sampler
	t0 := time.Unix(1000, 0)
	if r := sample(&s, t0, 100, 50); r[0] != 0 || r[1] != 0 {
		t.Fatalf("first read: %v, want zero rates", r)
	}
	// 2 s later: +20 and -10 over 2 s.
	if r := sample(&s, t0.Add(2*time.Second), 120, 40); r[0] != 10 || r[1] != -5 {
		t.Fatalf("after 2 s: %v, want [10 -5]", r)
	}
	// A read soon after compares with the same earlier reading (t0), not
	// with the one 100 ms ago.
	if r := sample(&s, t0.Add(2100*time.Millisecond), 141, 40); math.Abs(r[0]-41/2.1) > 1e-9 {
		t.Fatalf("read within the window: %v, want 41/2.1", r)
	}
	// Past the window the reading at 2 s becomes the base.
	if r := sample(&s, t0.Add(4*time.Second), 140, 40); r[0] != 10 || r[1] != 0 {
		t.Fatalf("after 4 s: %v, want [10 0]", r)
	}
}
