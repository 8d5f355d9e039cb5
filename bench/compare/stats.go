package main

import (
	"math"
	"slices"
	"time"
)

// latencies collects publish-to-deliver times of one run. One goroutine
// appends to a latencies value; runs with several consumers give each its
// own and merge them afterwards.
type latencies []time.Duration

// merge returns all samples of ls in one slice.
func merge(ls ...latencies) latencies {
	var n int
	for _, l := range ls {
		n += len(l)
	}
	out := make(latencies, 0, n)
	for _, l := range ls {
		out = append(out, l...)
	}
	return out
}

// percentile returns the q-quantile (0 < q <= 1) of samples by the
// nearest-rank method: the smallest sample that at least q of all samples
// are less than or equal to. It sorts samples in place and returns 0 for
// no samples.
func percentile(samples latencies, q float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	if !slices.IsSorted(samples) {
		slices.Sort(samples)
	}
	rank := int(math.Ceil(q * float64(len(samples))))
	rank = max(1, min(rank, len(samples)))
	return samples[rank-1]
}

// median returns the median of xs (the mean of the two middle values for an
// even count), or NaN for none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// millis converts d to fractional milliseconds, the unit of every latency
// figure in the table.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
