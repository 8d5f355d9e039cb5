package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestNodeRemovedWhileDown: node 4 of four `wharf serve` processes is
// killed, then removed (`wharf cluster remove-node` moves its replicas
// away). Started again on its data directory it never gets its removal
// from the metadata log, but the other nodes tell it: it exits saying it
// was removed, refuses the next start at once, and is never listed.
func TestNodeRemovedWhileDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four broker processes")
	}
	nodes := startCluster(t, 4)
	logsOnFailure(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	removed, rest := nodes[3], nodes[:3]
	for _, nd := range nodes {
		waitBrokers(ctx, t, nd, 4)
	}
	removed.kill()
	out, err := exec.CommandContext(ctx, removed.bin, "cluster", "remove-node", fmt.Sprint(removed.id),
		"--bootstrap-server", rest[0].kafkaAddr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("Node %d removed", removed.id)) {
		t.Fatalf("wharf cluster remove-node %d while it is down: %v\n%s", removed.id, err, out)
	}
	waitBrokers(ctx, t, rest[0], 3)

	removed.start()
	awaitRemovedExit(ctx, t, removed)
	removed.start()
	awaitRemovedExit(ctx, t, removed)
	for _, nd := range rest {
		if ids, err := nd.brokers(ctx, t); err != nil || len(ids) != 3 {
			t.Errorf("node %d lists brokers %v (%v) after node %d came back removed", nd.id, ids, err, removed.id)
		}
	}
}
