package cluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster membership (issue 13): a node joining a running cluster,
// partitions moved between nodes, a node removed.

// TestNodeJoins: three `wharf serve` processes, an acks=all producer
// writing a numbered sequence throughout; a fourth process started with
// --join and an empty data directory becomes a broker of the cluster
// (Metadata and `wharf cluster status` list it, a new topic places
// replicas on it and takes records through it), a second node asking to
// join under a taken id is refused, the new node restarted after a
// SIGKILL comes back, and the producer loses nothing.
func TestNodeJoins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four broker processes")
	}
	nodes := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "before-join"
	admin := newAdmin(t, seedsOf(nodes))
	createTopic(ctx, t, admin, topic)
	producer := newLoadProducer(t, seedsOf(nodes), topic)
	book := newBook()
	load := startLoad(ctx, producer, book)
	book.waitAcked(ctx, t, 200)

	t.Logf("%d acknowledged; node 4 joins", book.count())
	fourth := joiningNode(t, nodes[0], 4)
	fourth.start()
	fourth.waitReady()
	nodes = append(nodes, fourth)
	logsOnFailure(t, nodes)
	for _, nd := range nodes {
		waitBrokers(ctx, t, nd, 4)
	}
	t.Log("every node lists node 4")
	book.waitAcked(ctx, t, book.count()+200)

	createTopicN(ctx, t, admin, "after-join", 4)
	md, err := admin.Metadata(ctx, "after-join")
	if err != nil {
		t.Fatal(err)
	}
	var onFourth []int32
	for _, p := range md.Topics["after-join"].Partitions.Sorted() {
		if slices.Contains(p.Replicas, 4) {
			onFourth = append(onFourth, p.Partition)
		}
	}
	if len(onFourth) == 0 {
		t.Fatalf("no partition of a new RF3 topic of 4 partitions has a replica on node 4: %v", md.Topics["after-join"].Partitions)
	}
	produceNumbered(ctx, t, []string{fourth.kafkaAddr}, "after-join", 0, 200)

	// Restarted (--join still given), it is let in again as the node
	// it is.
	fourth.kill()
	fourth.start()
	fourth.waitReady()
	produceNumbered(ctx, t, []string{fourth.kafkaAddr}, "after-join", 200, 400)

	out, err := exec.CommandContext(ctx, fourth.bin, "cluster", "status", "--bootstrap-server", fourth.kafkaAddr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\n4  ") {
		t.Errorf("wharf cluster status on the new node: %v\n%s", err, out)
	}

	t.Log("a node asks to join as node 2")
	taken := joiningNode(t, nodes[1], 2)
	taken.start()
	select {
	case <-taken.exited:
	case <-ctx.Done():
		t.Fatal("a node joining as node 2, which the cluster has, did not exit")
	}
	if log := taken.logTail(); !strings.Contains(log, "node 2 is a member already") {
		t.Errorf("a node joining as node 2 exited without saying the id is taken:\n%s", log)
	}

	load.stop()
	checkLog(ctx, t, seedsOf(nodes), topic, book)
}

// joiningNode prepares node id (not started) to join the cluster through
// member, with its own empty data directory.
func joiningNode(t *testing.T, member *node, id int) *node {
	base := t.TempDir()
	return &node{t: t, id: id, bin: member.bin, dataDir: filepath.Join(base, "data"),
		kafkaAddr: freeAddr(t), clusterAddr: freeAddr(t), logPath: filepath.Join(base, "wharf.log"),
		extraArgs: []string{"--join", member.clusterAddr}}
}

// newLoadProducer is an acks=all producer to topic that finds new
// leaders quickly.
func newLoadProducer(t *testing.T, seeds []string, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// waitBrokers waits until nd's Metadata lists n brokers.
func waitBrokers(ctx context.Context, t *testing.T, nd *node, n int) {
	t.Helper()
	for {
		ids, err := nd.brokers(ctx, t)
		if err == nil && len(ids) == n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("node %d lists brokers %v, not %d: %v", nd.id, ids, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replicasOf is partition 0's replicas as the cluster's Metadata says.
func replicasOf(ctx context.Context, t *testing.T, admin *kadm.Client, topic string) []int32 {
	t.Helper()
	md, err := admin.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return md.Topics[topic].Partitions[0].Replicas
}

// TestReassignPartitionUnderLoad: four `wharf serve` processes, an RF3
// partition written by an acks=all producer throughout, moved with
// kadm's AlterPartitionReassignments to the node that held no replica,
// off the node that leads it (so leadership moves too): the reassignment
// shows in ListPartitionReassignments until it is done, Metadata then
// lists the new replicas, the node dropped deletes its replica, and the
// producer loses nothing.
func TestReassignPartitionUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four broker processes")
	}
	nodes := startCluster(t, 4)
	logsOnFailure(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "moved"
	admin := newAdmin(t, seedsOf(nodes))
	createTopic(ctx, t, admin, topic)
	leader := waitLeader(ctx, t, admin, topic, -1)
	from := replicasOf(ctx, t, admin, topic)
	var to []int32
	for _, nd := range nodes {
		if id := int32(nd.id); id != leader && slices.Contains(from, id) || !slices.Contains(from, id) {
			to = append(to, id)
		}
	}
	producer := newLoadProducer(t, seedsOf(nodes), topic)
	book := newBook()
	load := startLoad(ctx, producer, book)
	book.waitAcked(ctx, t, 300)

	t.Logf("moving %s-0 from %v (leader %d) to %v after %d acknowledgements", topic, from, leader, to, book.count())
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, to)
	altered, err := admin.AlterPartitionAssignments(ctx, req)
	if err != nil || altered[topic][0].Err != nil {
		t.Fatalf("AlterPartitionAssignments: %v %v", err, altered)
	}
	var invalid kadm.AlterPartitionAssignmentsReq
	invalid.Assign(topic, 0, []int32{1, 9})
	if altered, err := admin.AlterPartitionAssignments(ctx, invalid); err != nil || altered[topic][0].Err == nil {
		t.Errorf("a reassignment to node 9, which the cluster lacks: %v %v", err, altered)
	}
	waitReassigned(ctx, t, admin, topic, to)
	t.Logf("%s-0 is on %v after %d acknowledgements", topic, to, book.count())
	book.waitAcked(ctx, t, book.count()+300)
	load.stop()
	checkLog(ctx, t, seedsOf(nodes), topic, book)

	dropped := nodes[leader-1]
	waitGone(ctx, t, filepath.Join(dropped.dataDir, topic+"-0"))
}

// waitReassigned waits until no reassignment of topic's partition 0 is
// in progress and Metadata lists its replicas as want.
func waitReassigned(ctx context.Context, t *testing.T, admin *kadm.Client, topic string, want []int32) {
	t.Helper()
	for {
		listed, err := admin.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
		replicas := replicasOf(ctx, t, admin, topic)
		if err == nil && len(listed) == 0 && slices.Equal(replicas, want) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s-0 not reassigned to %v: replicas %v, in progress %v, %v", topic, want, replicas, listed, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitGone waits until path no longer exists.
func waitGone(ctx context.Context, t *testing.T, path string) {
	t.Helper()
	for {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s is still there", path)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRemoveNode: four `wharf serve` processes and an acks=all producer
// writing throughout. `wharf cluster remove-node` is refused, naming the
// partition, while an RF4 topic leaves no node to move a replica to;
// once that topic is gone it moves every replica off the node that leads
// the producer's partition (the internal topics' too), then removes it:
// the other nodes list three brokers, no partition names it, the
// producer loses nothing, and the metadata group no longer counts it
// (two of the three others keep a quorum). The removed node's process
// stops serving by itself once it applies its removal, and refuses to
// start again; it is never listed again.
func TestRemoveNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four broker processes")
	}
	nodes := startCluster(t, 4)
	logsOnFailure(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "evicted"
	admin := newAdmin(t, seedsOf(nodes))
	createTopic(ctx, t, admin, topic)
	if resp, err := admin.CreateTopic(ctx, 1, 4, nil, "everywhere"); err != nil || resp.Err != nil {
		t.Fatalf("an RF4 topic: %v %v", err, resp.Err)
	}
	leader := waitLeader(ctx, t, admin, topic, -1)
	removed := nodes[leader-1]
	var rest []*node
	for _, nd := range nodes {
		if nd != removed {
			rest = append(rest, nd)
		}
	}
	producer := newLoadProducer(t, seedsOf(rest), topic)
	book := newBook()
	load := startLoad(ctx, producer, book)
	book.waitAcked(ctx, t, 300)

	removeNode := func() (string, error) {
		out, err := exec.CommandContext(ctx, removed.bin, "cluster", "remove-node", fmt.Sprint(removed.id),
			"--bootstrap-server", rest[0].kafkaAddr).CombinedOutput()
		return string(out), err
	}
	if out, err := removeNode(); err == nil || !strings.Contains(out, "cannot be removed") || !strings.Contains(out, "everywhere-0") {
		t.Fatalf("removing node %d while an RF4 topic needs it: %v\n%s", removed.id, err, out)
	}
	if _, err := admin.DeleteTopic(ctx, "everywhere"); err != nil {
		t.Fatal(err)
	}
	t.Logf("removing node %d (the leader of %s-0) after %d acknowledgements", removed.id, topic, book.count())
	out, err := removeNode()
	if err != nil || !strings.Contains(out, fmt.Sprintf("Node %d removed", removed.id)) {
		t.Fatalf("wharf cluster remove-node %d: %v\n%s", removed.id, err, out)
	}
	t.Logf("wharf cluster remove-node:\n%s", out)
	for _, nd := range rest {
		waitBrokers(ctx, t, nd, 3)
	}
	md, err := newAdmin(t, seedsOf(rest)).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range md.Topics {
		for _, p := range td.Partitions {
			if slices.Contains(p.Replicas, int32(removed.id)) {
				t.Errorf("%s-%d still has node %d among its replicas %v", td.Topic, p.Partition, removed.id, p.Replicas)
			}
		}
	}
	book.waitAcked(ctx, t, book.count()+300)
	load.stop()
	checkLog(ctx, t, seedsOf(rest), topic, book)

	// The removed node stops serving by itself, and refuses to start
	// again: it never registers again.
	awaitRemovedExit(ctx, t, removed)
	removed.start()
	awaitRemovedExit(ctx, t, removed)
	waitBrokers(ctx, t, rest[0], 3)

	// The metadata group has three voters left: with the removed node
	// and one more down it still has a quorum (two of four would not).
	rest[0].kill()
	if resp, err := newAdmin(t, seedsOf(rest[1:])).CreateTopic(ctx, 1, 2, nil, "after-removal"); err != nil || resp.Err != nil {
		t.Errorf("creating a topic with the removed node and node %d down: %v %v", rest[0].id, err, resp.Err)
	}
}

// awaitRemovedExit waits for the process of nd, removed from the
// cluster, to exit saying why.
func awaitRemovedExit(ctx context.Context, t *testing.T, nd *node) {
	t.Helper()
	select {
	case <-nd.exited:
	case <-ctx.Done():
		t.Fatalf("node %d, removed from the cluster, is still running:\n%s", nd.id, nd.logTail())
	}
	tail := nd.logTail()
	i := strings.LastIndex(tail, "was removed (wharf cluster remove-node)")
	if i < 0 {
		t.Fatalf("node %d, removed from the cluster, exited without saying so:\n%s", nd.id, tail)
	}
	start := strings.LastIndex(tail[:i], "\n") + 1
	t.Logf("node %d exited: %s", nd.id, strings.SplitN(tail[start:], "\n", 2)[0])
}

// TestReassignedCoordinatorServes: the __consumer_offsets partitions
// node 4 holds no replica of are moved to node 4 alone, so it becomes
// their leader through reassignments: it then coordinates their groups
// (commits of groups hashing to every partition succeed), which needs
// its group coordinator to follow the partitions the reassignment
// opened here rather than those it found at start.
func TestReassignedCoordinatorServes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four broker processes")
	}
	nodes := startCluster(t, 4)
	logsOnFailure(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := newAdmin(t, seedsOf(nodes))
	createTopicN(ctx, t, admin, "committed", 1)
	var md kadm.Metadata
	for {
		var err error
		md, err = admin.Metadata(ctx, "__consumer_offsets")
		if err == nil && len(md.Topics["__consumer_offsets"].Partitions) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("__consumer_offsets: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var req kadm.AlterPartitionAssignmentsReq
	moved := kadm.TopicsSet{}
	for _, p := range md.Topics["__consumer_offsets"].Partitions {
		if !slices.Contains(p.Replicas, 4) {
			req.Assign("__consumer_offsets", p.Partition, []int32{4})
			moved.Add("__consumer_offsets", p.Partition)
		}
	}
	if len(moved["__consumer_offsets"]) == 0 {
		t.Fatal("node 4 holds a replica of every __consumer_offsets partition")
	}
	if altered, err := admin.AlterPartitionAssignments(ctx, req); err != nil || altered.Error() != nil {
		t.Fatalf("AlterPartitionAssignments: %v %v", err, altered.Error())
	}
	for {
		listed, err := admin.ListPartitionReassignments(ctx, moved)
		if err == nil && len(listed) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("__consumer_offsets partitions %v not moved to node 4: %v %v", moved, listed, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("__consumer_offsets partitions %v moved to node 4", slices.Sorted(maps.Keys(moved["__consumer_offsets"])))
	for i := range 40 {
		group := fmt.Sprint("group-", i)
		for {
			offsets := kadm.Offsets{}
			offsets.Add(kadm.Offset{Topic: "committed", Partition: 0, At: int64(i)})
			resp, err := admin.CommitOffsets(ctx, group, offsets)
			if err == nil && resp.Error() == nil {
				break
			}
			if ctx.Err() != nil {
				coordinator := admin.FindGroupCoordinators(ctx, group)
				t.Fatalf("commit of %s: %v %v (coordinator %v)", group, err, resp.Error(), coordinator)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
