package replica_test

import (
	"errors"
	"testing"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/replica"
)

// TestRaftLogAppendDuringTransferIsNotLeader: while a leader hands its
// leadership over (a controlled shutdown, ElectLeaders, the balancer),
// Raft drops proposals. The append must say "not the leader", which a
// Kafka client answers by finding the next leader, rather than fail as a
// storage error.
func TestRaftLogAppendDuringTransferIsNotLeader(t *testing.T) {
	net := raft.NewMemNetwork()
	logs := cluster(t, 3, net)
	leader := leaderOf(t, logs)
	appendCommitted(t, leader, 5)
	var from, to uint64
	for i, l := range logs {
		if l == leader {
			from = uint64(i + 1)
		} else {
			to = uint64(i + 1)
		}
	}
	// Cut off, the target never gets the leader's go-ahead: the transfer
	// stays pending for an election timeout.
	net.Cut(from, to, true)
	leader.Group().TransferLeadership(to)
	_, err := leader.Append(testBatch(1), replica.AppendOptions{AckCommitted: true})
	if !errors.Is(err, replica.ErrNotLeader) {
		t.Fatalf("an append during a leadership transfer: %v, want ErrNotLeader", err)
	}
}
