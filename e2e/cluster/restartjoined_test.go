package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestChangedClusterRestartsWhole: three nodes; node 4 joins (--join
// through node 1) and node 3 is removed (`wharf cluster remove-node 3`),
// so the metadata group's voters are 1, 2 and 4. The whole cluster is
// stopped, once with SIGKILL and once with SIGTERM, and started again
// with the flags each node was first started with: nodes 1 and 2 with
// the --initial-cluster that still names node 3, node 4 with --join.
// The removed node 3, started too, refuses at once; then two of the
// voters, one of them node 4, start alone (1 and 4 after the kill, 2 and
// 4 after the SIGTERM): they are a quorum of the group, so they must
// find each other, serve an acks=all produce and every record
// acknowledged before, without the third voter; node 3 is never listed
// as a broker again.
func TestChangedClusterRestartsWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four broker processes")
	}
	all := startJoinedCluster(t)
	nodes, fourth := all[:3], all[3]
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	createTopicN(ctx, t, newAdmin(t, seedsOf(all)), coldTopic, coldPartitions)
	acked := produceNumbered(ctx, t, seedsOf(all), coldTopic, 0, coldRecords)

	removed := nodes[2]
	out, err := exec.CommandContext(ctx, removed.bin, "cluster", "remove-node", "3",
		"--bootstrap-server", nodes[0].kafkaAddr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Node 3 removed") {
		t.Fatalf("wharf cluster remove-node 3: %v\n%s", err, out)
	}
	awaitRemovedExit(ctx, t, removed)
	voters := []*node{nodes[0], nodes[1], fourth}

	for _, stop := range []struct {
		name  string
		stop  func(*node)
		first []*node // the two voters started alone
		last  *node
	}{
		{"SIGKILL", (*node).kill, []*node{nodes[0], fourth}, nodes[1]},
		{"SIGTERM", (*node).terminate, []*node{nodes[1], fourth}, nodes[0]},
	} {
		for _, nd := range voters {
			stop.stop(nd)
		}
		t.Logf("every node stopped with %s; node 3, removed, starts again", stop.name)
		removed.start()
		awaitRemovedExit(ctx, t, removed)

		started := time.Now()
		for _, nd := range stop.first {
			nd.start()
		}
		for _, nd := range stop.first {
			nd.waitReady()
		}
		seeds := seedsOf(stop.first)
		produceOneAcksAll(ctx, t, seeds)
		t.Logf("nodes %d and %d alone: serving, first acks=all produce acknowledged %v after their start",
			stop.first[0].id, stop.first[1].id, time.Since(started).Round(time.Millisecond))
		requireRecords(ctx, t, seeds, acked)
		for _, nd := range stop.first {
			if ids, err := nd.brokers(ctx, t); err != nil || slices.Contains(ids, 3) {
				t.Errorf("node %d lists the brokers %v (%v): node 3 was removed", nd.id, ids, err)
			}
		}
		stop.last.start()
		stop.last.waitReady()
	}
	produceOneAcksAll(ctx, t, seedsOf(voters))
	for _, nd := range voters {
		waitFor(t, ctx, fmt.Sprintf("node %d to list the brokers 1, 2 and 4", nd.id), func() bool {
			ids, err := nd.brokers(ctx, t)
			slices.Sort(ids)
			return err == nil && slices.Equal(ids, []int32{1, 2, 4})
		})
	}
}

// startJoinedCluster starts a cluster of three nodes and a fourth that
// joins it through node 1 (--join), and returns the four; their logs
// show if the test fails.
func startJoinedCluster(t *testing.T) []*node {
	t.Helper()
	nodes := startCluster(t, 3)
	fourth := joiningNode(t, nodes[0], 4)
	fourth.start()
	fourth.waitReady()
	nodes = append(nodes, fourth)
	logsOnFailure(t, nodes)
	return nodes
}
