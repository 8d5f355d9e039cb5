package replica_test

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Benchmarks of the Raft log, in one process: three nodes over loopback
// TCP, each with its own listener, host and files (the test's temporary
// directory, on whatever disk holds it: fsyncs are real).
//
//	go test ./internal/replica -run '^$' -bench 'RaftAppend|LocalAppend' -benchtime 20000x
//	go test ./internal/replica -run '^$' -bench RaftIdleGroups -benchtime 1x
//	go test ./internal/replica -run '^$' -bench RaftFailover -benchtime 5x
//
// docs/replication.md has the figures of a run, and says on what machine.

// appendWriters is how many appends are in flight at once, as many
// producers' requests would be.
const appendWriters = 64

// batch1KiB is a record batch of about 1 KiB (eight 100-byte records).
func batch1KiB() []byte {
	recs := make([]record.Record, 8)
	for i := range recs {
		recs[i] = record.Record{Value: make([]byte, 100)}
	}
	return record.NewBatch(time.Now().UnixMilli(), recs)
}

// benchAppends runs b.N acks=all appends of 1 KiB batches from
// appendWriters goroutines through appendFn, which returns when the
// append is acknowledged, and reports the latency percentiles.
func benchAppends(b *testing.B, appendFn func(batch []byte) error) {
	batch := batch1KiB()
	b.SetBytes(int64(len(batch)))
	lat := make([][]time.Duration, appendWriters)
	var next sync.Mutex
	left := b.N
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range appendWriters {
		wg.Go(func() {
			for {
				next.Lock()
				if left == 0 {
					next.Unlock()
					return
				}
				left--
				next.Unlock()
				start := time.Now()
				if err := appendFn(batch); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkLocalAppend is the baseline: one node's log (RF1), acks=all,
// group-committed fsyncs.
func BenchmarkLocalAppend(b *testing.B) {
	l, err := replica.Open(b.TempDir(), replica.DefaultConfig(), replica.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	benchAppends(b, func(batch []byte) error {
		// Append rewrites the batch it is given: each its own copy, as
		// each produce request would be.
		a, err := l.Append(append([]byte(nil), batch...), replica.AppendOptions{AckCommitted: true})
		if err != nil {
			return err
		}
		return a.Ack.Wait(context.Background())
	})
}

// BenchmarkRaftAppend is the same through a three-replica Raft group
// (RF3): acknowledged once a majority has the batch fsynced.
func BenchmarkRaftAppend(b *testing.B) {
	c := newTCPCluster(b, 3, 1, raft.Config{})
	l := c.leader(0, 10*time.Second).logs[0]
	benchAppends(b, func(batch []byte) error {
		a, err := l.Append(batch, replica.AppendOptions{AckCommitted: true})
		if err != nil {
			return err
		}
		return a.Ack.Wait(context.Background())
	})
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRaftIdleGroups measures what 1,000 idle RF3 groups cost each
// node once they have quiesced: CPU time over a 10 s window (the three
// nodes share the process; the figure is per node) and the heap.
func BenchmarkRaftIdleGroups(b *testing.B) {
	const groups = 1000
	for range b.N {
		c := newTCPCluster(b, 3, groups, raft.Config{})
		deadline := time.Now().Add(5 * time.Minute)
		for !allQuiesced(c) {
			if time.Now().After(deadline) {
				b.Fatal("the groups did not quiesce in 5 minutes")
			}
			time.Sleep(100 * time.Millisecond)
		}
		const window = 10 * time.Second
		before := cpuTime()
		time.Sleep(window)
		used := cpuTime() - before
		perNode := float64(used) / float64(window) / 3 * 100
		b.ReportMetric(perNode, "%cpu/node")
		b.Logf("%d idle RF3 groups: %.3f%% of a core per node (%v of CPU in %v for 3 nodes)", groups, perNode, used, window)
	}
}

func allQuiesced(c *tcpCluster) bool {
	for _, n := range c.nodes {
		for _, l := range n.logs {
			if !l.Group().Quiesced() {
				return false
			}
		}
	}
	return true
}

// BenchmarkRaftFailover measures, with a 1 s election timeout (ticks of
// 100 ms, 10 of them), how long after its leader's node stops a group has
// a new leader that commits an append.
func BenchmarkRaftFailover(b *testing.B) {
	c := newTCPCluster(b, 3, 1, raft.Config{TickInterval: 100 * time.Millisecond, ElectionTicks: 10})
	var worst, total time.Duration
	for i := range b.N {
		old := c.leader(0, 30*time.Second)
		appendCommitted(b, old.logs[0], 1)
		time.Sleep(time.Second) // idle: the group quiesces
		start := time.Now()
		c.stop(old)
		n := c.leader(0, 30*time.Second)
		appendCommitted(b, n.logs[0], 1)
		took := time.Since(start)
		total += took
		worst = max(worst, took)
		b.Logf("failover %d: %v", i+1, took)
		c.restart(old)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
}

// BenchmarkRaftEntries: a leader's Raft reading 900 one-record entries
// back from its log (of the 1,024 it keeps below the applied one), as it
// does for each append it sends a follower that catches up, in the host's
// loop, so it delays every group of the node.
func BenchmarkRaftEntries(b *testing.B) {
	l := openRaft(b, b.TempDir(), startHost(b, 1, nil), 1)
	b.Cleanup(func() { l.Close() })
	waitLeading(b, l)
	appendCommitted(b, l, 4000)
	end := uint64(3 + 4000) // after the group's first entry, the leader's empty one and the batches
	for b.Loop() {
		n, err := l.Entries(end-900, end, 1<<20)
		if err != nil || n != 900 {
			b.Fatalf("Entries: %d entries, %v", n, err)
		}
	}
}
