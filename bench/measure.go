package main

import (
	"sort"
	"time"
)

// recordSize is the value size of every benchmark record: 1 KiB, no key,
// no headers.
const recordSize = 1 << 10

// result is one timed run of a workload or baseline.
type result struct {
	bytes   int64         // payload bytes moved (record values for Kafka workloads)
	records int64         // records moved; 0 for baselines
	elapsed time.Duration // wall time of the run
}

// mbps is the run's throughput in MB/s (10^6 bytes per second, as go test
// -bench reports it).
func (r result) mbps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.bytes) / 1e6 / r.elapsed.Seconds()
}

// recordsPerSec is the run's rate in records per second.
func (r result) recordsPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.records) / r.elapsed.Seconds()
}

// limit says when a run stops: after records records (testing.B's b.N) or
// after a duration, whichever is set.
type limit struct {
	records  int64
	duration time.Duration
}

func forRecords(n int64) limit          { return limit{records: n} }
func forDuration(d time.Duration) limit { return limit{duration: d} }
func (l limit) timed() bool             { return l.duration > 0 }
func (l limit) done(n int64, start time.Time) bool {
	if l.timed() {
		return time.Since(start) >= l.duration
	}
	return n >= l.records
}

// medianIndex is the index of the run with the median throughput (the
// lower middle one for an even count), so a table row can show that run's
// other figures too.
func medianIndex(runs []result) int {
	idx := make([]int, len(runs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return runs[idx[a]].mbps() < runs[idx[b]].mbps() })
	return idx[(len(idx)-1)/2]
}
