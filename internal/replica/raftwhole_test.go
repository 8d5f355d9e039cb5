package replica_test

import (
	"fmt"
	"testing"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// TestRaftLogWholeSnapshots: with WholeSnapshots, a follower that was away
// while the others compacted takes the leader's whole compacted log from a
// snapshot, not only what lies above its own high watermark, and counts
// the install (Installs: even once done).
func TestRaftLogWholeSnapshots(t *testing.T) {
	net := raft.NewMemNetwork()
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	hosts := make([]*raft.Host, 3)
	logs := make([]*replica.RaftLog, 3)
	open := func(i int) {
		hosts[i] = startHost(t, uint64(i+1), net)
		l, err := replica.OpenRaft(dirs[i], compactedConfig(), replica.RaftOptions{
			Host: hosts[i], Group: 7, Members: []uint64{1, 2, 3}, Window: 4, Logger: quiet, WholeSnapshots: true})
		if err != nil {
			t.Fatalf("node %d does not open: %v", i+1, err)
		}
		logs[i] = l
		t.Cleanup(func() { l.Close() })
	}
	for i := range 3 {
		open(i)
	}
	write := func(live []*replica.RaftLog, rounds int) int64 {
		var end int64
		for i := range rounds {
			recs := make([]record.Record, 8)
			for k := range recs {
				recs[k] = record.Record{Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "v%d-%d", i, k)}
			}
			end = appendAcked(t, live, recs)
		}
		return end
	}
	away := write(logs, 40)
	waitHW(t, logs[2], away)
	logs[2].Close()
	hosts[2].Close()
	net.Unregister(3)
	end := write(logs[:2], 80)
	for _, l := range logs[:2] {
		waitHW(t, l, end)
		compactUntilCleaned(t, l)
	}

	open(2)
	waitHW(t, logs[2], end)
	if n := logs[2].Installs(); n == 0 || n%2 != 0 {
		t.Fatalf("install count %d, want one done at least", n)
	}
	// Below where it stopped, the follower holds the leader's compacted
	// records, not the 320 it had.
	kept := max(recordsBelow(t, logs[0], away), recordsBelow(t, logs[1], away))
	if got := recordsBelow(t, logs[2], away); got > kept {
		t.Fatalf("the follower holds %d records below %d, its compacted peers at most %d", got, away, kept)
	}
}

// recordsBelow counts l's records below end.
func recordsBelow(t *testing.T, l *replica.RaftLog, end int64) int {
	t.Helper()
	n := 0
	forEachRecord(t, l, end, func(int64, record.Record) { n++ })
	return n
}
