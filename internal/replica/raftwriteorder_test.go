package replica_test

import (
	"testing"

	"github.com/wharf-mq/wharf/internal/replica"
)

// TestRaftFollowerBatchWaitsForNewTermEntry: a follower whose disk is
// slow hears of the new leader's empty entry, then, in a later append,
// of a batch of the new term. Its host must not write the batch while
// the empty entry's sync round has not ended: a power cut could keep the
// batch and lose the entry, and the follower would not open again (seed
// 482 of the simulation, issue 13). Once the round ends, the batch is
// written and the follower catches up.
func TestRaftFollowerBatchWaitsForNewTermEntry(t *testing.T) {
	nodes := manualCluster(t, 3)
	leader, slow := nodes[0], nodes[2]
	if err := leader.log.Group().Campaign(); err != nil {
		t.Fatal(err)
	}
	for i := 0; !leader.log.Group().Status().Leading(); i++ {
		if i == 1000 {
			t.Fatalf("node 1 does not lead after 1000 steps: %+v", leader.log.Group().Status())
		}
		step(nodes, holdOnly(slow))
	}
	a, err := leader.log.Append(testBatch(2), replica.AppendOptions{AckCommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	// Steps enough for heartbeats to have the leader send the batch to
	// the slow follower, which never acknowledged the empty entry.
	stepUntilCommitted(nodes, leader, a, holdOnly(slow))
	for range 20 {
		step(nodes, holdOnly(slow))
	}
	if leader.log.HighWatermark() <= a.LastOffset {
		t.Fatalf("the append is not committed by the leader and the other follower: high watermark %d", leader.log.HighWatermark())
	}
	if len(slow.held) == 0 {
		t.Fatal("the slow follower ran no sync round: the case under test is gone")
	}
	if end := slow.log.EndOffset(); end != 0 {
		t.Fatalf("the slow follower wrote records up to %d while the new term's entry before them was not durable", end)
	}

	// Its disk catches up: the rounds end in order, and the batch follows.
	for _, b := range slow.held {
		b.Run(1)
		slow.host.Synced(b)
	}
	slow.held = nil
	for i := 0; slow.log.HighWatermark() <= a.LastOffset; i++ {
		if i == 100 {
			t.Fatalf("the slow follower's high watermark is %d after 100 steps, want past %d", slow.log.HighWatermark(), a.LastOffset)
		}
		step(nodes, nil)
	}
}
