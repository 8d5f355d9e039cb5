package replica_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wharf-mq/wharf/internal/replica"
)

// TestSecondOpenOfAReplicaTouchesNothing: a broker that races two paths
// to one partition opened its directory twice; the second open recovered
// the files under the live replica and closed them when the host refused
// the group, and the partition's log was corrupt at the next start
// (TestChangedClusterRestartsWhole, node 4, "corrupt record batch"). A
// second open now fails at once, and the replica open keeps everything.
func TestSecondOpenOfAReplicaTouchesNothing(t *testing.T) {
	dir := t.TempDir()
	h := startHost(t, 1, nil)
	l := openRaft(t, dir, h, 1)
	waitLeading(t, l)
	appendCommitted := func(n int) {
		t.Helper()
		a, err := l.Append(testBatch(n), replica.AppendOptions{AckCommitted: true})
		if err == nil {
			err = a.Commit.Wait(context.Background())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	appendCommitted(3)
	if _, err := replica.OpenRaft(dir, replica.DefaultConfig(), replica.RaftOptions{Host: h, Group: 7, Members: []uint64{1}, Logger: quiet}); !errors.Is(err, replica.ErrReplicaOpen) {
		t.Fatalf("second open of an open replica: %v, want ErrReplicaOpen", err)
	}
	appendCommitted(2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openRaft(t, dir, h, 1)
	defer l.Close()
	if end := l.EndOffset(); end != 5 {
		t.Fatalf("reopened replica ends at %d, want 5", end)
	}
}
