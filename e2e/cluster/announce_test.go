package cluster

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUnknownVoterAddressAfterWholeStop (issue 13): node 2 is down
// while node 4 joins (through node 1, with two of the three voters up),
// and node 3 is removed, so the metadata group's voters are 1, 2 and 4.
// Node 2's address book is then made to lack node 4, as it would if
// node 2 had stopped before applying the join. The whole cluster stops;
// started alone, nodes 2 and 4 are a quorum of the voters, but node 2
// does not know where 4 listens, and the lower id dials: node 4 must
// tell node 2 its address, so that the two serve an acks=all produce
// and every record acknowledged before, within ten seconds.
func TestUnknownVoterAddressAfterWholeStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four broker processes")
	}
	nodes := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	second, removed := nodes[1], nodes[2]
	second.kill()
	// Creating the topic also waits out a metadata leader that died
	// with node 2, before node 4 asks to join.
	createTopicN(ctx, t, newAdmin(t, seedsOf([]*node{nodes[0], removed})), coldTopic, coldPartitions)
	fourth := joiningNode(t, nodes[0], 4)
	logsOnFailure(t, append(nodes[:3:3], fourth))
	fourth.start()
	fourth.waitReady()
	t.Log("node 4 joined through node 1 while node 2 was down")
	second.start()
	second.waitReady()

	out, err := exec.CommandContext(ctx, removed.bin, "cluster", "remove-node", "3",
		"--bootstrap-server", nodes[0].kafkaAddr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Node 3 removed") {
		t.Fatalf("wharf cluster remove-node 3: %v\n%s", err, out)
	}
	awaitRemovedExit(ctx, t, removed)
	voters := []*node{nodes[0], second, fourth}
	acked := produceNumbered(ctx, t, seedsOf(voters), coldTopic, 0, coldRecords)
	for _, nd := range voters {
		nd.kill()
	}
	forgetNode(t, second, fourth.id)

	alone := []*node{second, fourth}
	started := time.Now()
	for _, nd := range alone {
		nd.start()
	}
	quorumCtx, cancelQuorum := context.WithTimeout(ctx, 10*time.Second)
	defer cancelQuorum()
	produceOneAcksAll(quorumCtx, t, seedsOf(alone))
	t.Logf("nodes 2 and 4 alone: an acks=all produce acknowledged %v after their start", time.Since(started).Round(time.Millisecond))
	requireRecords(ctx, t, seedsOf(alone), acked)
}

// forgetNode removes node id from nd's address book (nd is stopped).
func forgetNode(t *testing.T, nd *node, id int) {
	t.Helper()
	path := filepath.Join(nd.dataDir, "cluster-nodes.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var book map[int32]string
	if err := json.Unmarshal(data, &book); err != nil {
		t.Fatal(err)
	}
	if _, ok := book[int32(id)]; !ok {
		t.Fatalf("node %d's address book %v lacks node %d already", nd.id, book, id)
	}
	delete(book, int32(id))
	if data, err = json.Marshal(book); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
