package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/replica"
)

// manualNode is a node whose host the test drives by hand (Tick, Process,
// Synced), so it decides when each sync round ends.
type manualNode struct {
	host *raft.Host
	log  *replica.RaftLog
	held []*raft.SyncBatch // rounds whose fsync the test has not let end
}

func manualCluster(t *testing.T, size uint64) []*manualNode {
	t.Helper()
	net := raft.NewMemNetwork()
	var members []uint64
	for id := uint64(1); id <= size; id++ {
		members = append(members, id)
	}
	var nodes []*manualNode
	for _, id := range members {
		h, err := raft.NewHost(raft.Config{NodeID: id, Transport: net.Transport(id), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		net.Register(id, h)
		t.Cleanup(h.Close)
		l := openRaft(t, t.TempDir(), h, members...)
		t.Cleanup(func() { l.Close() })
		nodes = append(nodes, &manualNode{host: h, log: l})
	}
	return nodes
}

// roundFate is what step does with a node's sync rounds.
type roundFate int

const (
	endRound  roundFate = iota // run it and tell the host (Synced)
	holdRound                  // keep it in flight: its fsync has not ended
	fsyncOnly                  // run it, but do not tell the host yet
)

// step ticks every node and runs its work, its sync rounds as fate (nil:
// endRound for all) says.
func step(nodes []*manualNode, fate func(*manualNode) roundFate) {
	for _, n := range nodes {
		n.host.Tick()
		for b := n.host.Process(); b != nil; b = n.host.Process() {
			f := endRound
			if fate != nil {
				f = fate(n)
			}
			if f != holdRound {
				b.Run(1)
			}
			if f == endRound {
				n.host.Synced(b)
			} else {
				n.held = append(n.held, b)
			}
		}
	}
}

// holdOnly is the fate that holds the sync rounds of held and ends the
// others'.
func holdOnly(held *manualNode) func(*manualNode) roundFate {
	return func(n *manualNode) roundFate {
		if n == held {
			return holdRound
		}
		return endRound
	}
}

// electFirst makes nodes[0] the leader, ready for appends.
func electFirst(t *testing.T, nodes []*manualNode) *manualNode {
	t.Helper()
	if err := nodes[0].log.Group().Campaign(); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		step(nodes, nil)
		if nodes[0].log.Group().Status().Leading() {
			return nodes[0]
		}
	}
	t.Fatalf("node 1 does not lead after 1000 steps: %+v", nodes[0].log.Group().Status())
	return nil
}

// stepUntilCommitted steps until the leader's high watermark passes a,
// 100 steps at most.
func stepUntilCommitted(nodes []*manualNode, leader *manualNode, a replica.Appended, fate func(*manualNode) roundFate) {
	for range 100 {
		step(nodes, fate)
		if leader.log.HighWatermark() > a.LastOffset {
			return
		}
	}
}

// ackedSoon checks that a's acknowledgement comes within a second.
func ackedSoon(t *testing.T, a replica.Appended, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := a.Ack.Wait(ctx); err != nil {
		t.Fatalf("acks=all append not acknowledged %s: %v", what, err)
	}
}

// TestRaftAckBeforeLeaderFsync: an acks=all append is acknowledged, and
// below the high watermark, once both followers have it fsynced, while
// the leader's own fsync of it has not ended: a majority has it durable,
// which is all Raft's commit (and Kafka's acks=all) asks.
func TestRaftAckBeforeLeaderFsync(t *testing.T) {
	nodes := manualCluster(t, 3)
	leader := electFirst(t, nodes)
	a, err := leader.log.Append(testBatch(3), replica.AppendOptions{AckCommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	stepUntilCommitted(nodes, leader, a, holdOnly(leader))
	if len(leader.held) == 0 {
		t.Fatal("the leader ran no sync round for the append")
	}
	ackedSoon(t, a, "with the followers' fsyncs done and the leader's pending")
	if hw := leader.log.HighWatermark(); hw <= a.LastOffset {
		t.Fatalf("high watermark %d, want past %d", hw, a.LastOffset)
	}
}

// TestRaftFollowerAcksWhenFsynced: a follower's acknowledgement leaves
// for its leader when its fsync ends, before its host's loop hears the
// round end; with the other follower's disk stuck, it alone completes the
// leader's majority.
func TestRaftFollowerAcksWhenFsynced(t *testing.T) {
	nodes := manualCluster(t, 3)
	leader := electFirst(t, nodes)
	a, err := leader.log.Append(testBatch(3), replica.AppendOptions{AckCommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	fates := map[*manualNode]roundFate{leader: endRound, nodes[1]: fsyncOnly, nodes[2]: holdRound}
	stepUntilCommitted(nodes, leader, a, func(n *manualNode) roundFate { return fates[n] })
	if len(nodes[1].held) == 0 {
		t.Fatal("node 2 ran no sync round for the append")
	}
	ackedSoon(t, a, "with one follower's fsync done but its loop not told")
}

// TestRaftSyncRoundsOverlap: what a group writes while its sync round is
// in flight goes into a second round at once, not after the first ends.
func TestRaftSyncRoundsOverlap(t *testing.T) {
	nodes := manualCluster(t, 3)
	leader := electFirst(t, nodes)
	for i := range 2 {
		if _, err := leader.log.Append(testBatch(1), replica.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		step(nodes, holdOnly(leader))
		if len(leader.held) != i+1 {
			t.Fatalf("after append %d: %d sync rounds in flight on the leader, want %d", i+1, len(leader.held), i+1)
		}
	}
	// Ended out of order, the rounds still commit both appends.
	for _, b := range []*raft.SyncBatch{leader.held[1], leader.held[0]} {
		b.Run(1)
		leader.host.Synced(b)
	}
	leader.held = nil
	end := leader.log.EndOffset()
	for i := 0; leader.log.HighWatermark() < end; i++ {
		if i == 100 {
			t.Fatalf("high watermark %d after 100 steps, want %d", leader.log.HighWatermark(), end)
		}
		step(nodes, nil)
	}
}
