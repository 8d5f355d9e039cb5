package replica_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/wharf-mq/wharf/internal/replica"
)

// TestSecondOpenOfAReplicaTouchesNothing: a broker that raced two paths
// to one partition opened its directory twice; the second open recovered
// the files under the live replica and closed them when the host refused
// the group, and the partition's log was corrupt at the next start
// (TestChangedClusterRestartsWhole, node 4: "corrupt record batch at
// …/cold-2/log/00000000000000000000.log:1038: magic 0", a hole where the
// second open had cut the file). A second open now fails at once, and
// the open replica keeps everything it committed meanwhile. (On the old
// code this test fails only by the error: here the second open found no
// tail to cut, which the joining replica of that run, mid-snapshot, had.)
func TestSecondOpenOfAReplicaTouchesNothing(t *testing.T) {
	dir := t.TempDir()
	h := startHost(t, 1, nil)
	l := openRaft(t, dir, h, 1)
	waitLeading(t, l)

	var appended int64
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			a, err := l.Append(testBatch(10), replica.AppendOptions{AckCommitted: true})
			if err == nil {
				err = a.Commit.Wait(context.Background())
			}
			if err != nil {
				t.Error(err)
				return
			}
			appended += 10
		}
	})
	for range 50 {
		if _, err := replica.OpenRaft(dir, replica.DefaultConfig(), replica.RaftOptions{Host: h, Group: 7, Members: []uint64{1}, Logger: quiet}); !errors.Is(err, replica.ErrReplicaOpen) {
			t.Errorf("second open of an open replica: %v, want ErrReplicaOpen", err)
		}
	}
	close(stop)
	writer.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, err := replica.OpenRaft(dir, replica.DefaultConfig(), replica.RaftOptions{Host: h, Group: 7, Members: []uint64{1}, Logger: quiet})
	if err != nil {
		t.Fatalf("reopening the replica: %v", err)
	}
	defer l.Close()
	if end := l.EndOffset(); end != appended {
		t.Fatalf("reopened replica ends at %d, want %d (every committed append)", end, appended)
	}
}
