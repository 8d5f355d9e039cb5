package replica_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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

// TestWholeSnapshotIsOneVersion: a whole snapshot the leader streams in
// chunks gives the follower one version of the log even when a pass,
// between two chunks, drops a key's record, which the follower already
// staged, together with its tombstone, which it has not yet. The pass runs
// after the first chunk (a record of 700 KiB fills it); the stream starts
// over from the start, and so does the follower's stage, which must not
// hold the deleted key's record.
func TestWholeSnapshotIsOneVersion(t *testing.T) {
	h := startHost(t, 1, nil)
	l, err := replica.OpenRaft(t.TempDir(), compactedConfig(), replica.RaftOptions{
		Host: h, Group: 7, Members: []uint64{1}, Window: 4, Logger: quiet, WholeSnapshots: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	logs := []*replica.RaftLog{l}
	pad := make([]byte, 700<<10)
	appendAcked(t, logs, []record.Record{{Key: []byte("gone"), Value: []byte("v")}})
	appendAcked(t, logs, []record.Record{{Key: []byte("pad0"), Value: pad}})
	appendAcked(t, logs, []record.Record{{Key: []byte("pad1"), Value: pad}})
	tombstone := appendAcked(t, logs, []record.Record{{Key: []byte("gone")}}) - 1
	for i := range 12 { // rolls the tombstone's segment (compactedConfig's are 1 KiB)
		appendAcked(t, logs, []record.Record{{Key: fmt.Appendf(nil, "k%d", i), Value: pad[:300]}})
	}
	// The anchor, the snapshot's end, up to the active segment: a pass
	// that may rewrite nothing.
	if _, err := l.CompactRetaining(context.Background(), time.Now(), 0, nil); err != nil {
		t.Fatal(err)
	}

	var passed bool
	staged, complete, err := l.StageOwnSnapshot(t.TempDir(), func() {
		if passed {
			return
		}
		passed = true
		// Past delete.retention.ms: the pass drops the tombstone too.
		st, err := l.Compact(context.Background(), time.Now().Add(25*time.Hour))
		if err != nil || !st.Cleaned {
			t.Errorf("the pass between two chunks: %+v, %v", st, err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer staged.Close()
	if !complete || staged.EndOffset() <= tombstone {
		t.Fatalf("staged [%d, %d), complete %v; the tombstone is at %d", staged.StartOffset(), staged.EndOffset(), complete, tombstone)
	}
	latest := map[string][]byte{}
	forEachRecord(t, staged, staged.EndOffset(), func(_ int64, r record.Record) { latest[string(r.Key)] = r.Value })
	if v, ok := latest["gone"]; ok && v != nil {
		t.Fatalf("the staged snapshot holds the deleted key's record %q and not its tombstone", v)
	}
}
