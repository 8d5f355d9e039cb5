package cluster

import (
	"context"
	"flag"
	"fmt"
	"hash/crc32"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	// faultRuns turns the fault tests on: each starts three to five
	// processes under three clients' load for half a minute or more, and
	// a 2-core machine running the rest of the suite beside them makes
	// their timing unreliable, so the normal suite leaves them out (as it
	// does the crash soaks) and runs the lighter kill tests instead.
	faultRuns = flag.Bool("cluster.faults", false, "run e2e/cluster's fault tests (*Fault: SIGSTOP, rolling restart, follower and two-of-five kills, network partitions)")
	// faultCycles is how many times each fault test repeats its fault.
	faultCycles = flag.Int("cluster.cycles", 1, "fault cycles per fault test in e2e/cluster (each cycle: the fault, recovery, more load)")
)

// requireFaultRun skips a fault test unless -cluster.faults is given.
func requireFaultRun(t *testing.T) {
	t.Helper()
	if !*faultRuns {
		t.Skip("a cluster fault run: go test ./e2e/cluster -cluster.faults")
	}
}

// electionTimeout is the nodes' Raft election timeout, the default of
// `wharf serve --election-timeout` (ten ticks of 100 ms), which the
// fault tests leave as it is.
const electionTimeout = time.Second

// faultTest is one fault test's cluster, topic and checker.
type faultTest struct {
	t          *testing.T
	ctx        context.Context
	nodes      []*node
	admin      *kadm.Client
	topic      string
	partitions int32
	rf         int
	ledger     *ledger
}

// newFaultTest creates topic (partitions × rf) on nodes; it does not
// start the load.
func newFaultTest(ctx context.Context, t *testing.T, nodes []*node, topic string, partitions int32, rf int) *faultTest {
	t.Helper()
	ft := &faultTest{t: t, ctx: ctx, nodes: nodes, topic: topic, partitions: partitions, rf: rf, ledger: newLedger()}
	ft.admin = newAdmin(t, ft.seeds())
	for {
		resp, err := ft.admin.CreateTopic(ctx, partitions, int16(rf), nil, topic)
		if err == nil && resp.Err == nil {
			break
		}
		if ctx.Err() != nil {
			for _, nd := range nodes {
				t.Logf("node %d's log:\n%s", nd.id, nd.logTail())
			}
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ft.waitHealthy("the new topic")
	return ft
}

// seeds are every node's Kafka address.
func (ft *faultTest) seeds() []string {
	seeds := make([]string, len(ft.nodes))
	for i, nd := range ft.nodes {
		seeds[i] = nd.kafkaAddr
	}
	return seeds
}

// run starts the three producers, waits for their first
// acknowledgements, runs cycle -cluster.cycles times (each cycle injects
// faultsPerCycle faults and waits for the cluster to recover), stops the
// load and runs the checker.
func (ft *faultTest) run(faultsPerCycle int, cycle func()) {
	ft.t.Helper()
	stopLoad := startProducers(ft.ctx, ft.t, ft.seeds(), ft.topic, ft.partitions, ft.ledger)
	ft.t.Cleanup(ft.logViewsOnFailure)
	ft.progress(100, "the first acknowledgements")
	for range *faultCycles {
		cycle()
	}
	stopLoad()
	ft.verify(*faultCycles * faultsPerCycle)
}

// progress waits until every stream (but those of the producers in
// skip) has n more acknowledgements than now.
func (ft *faultTest) progress(n int, what string, skip ...string) {
	ft.t.Helper()
	ft.ledger.waitProgress(ft.ctx, ft.t, ft.ledger.acks(), n, what, skip...)
}

// verify runs the checker and logs the figures of the run.
func (ft *faultTest) verify(faults int) {
	ft.t.Helper()
	ft.waitHealthy("the load stopped") // the checker reads from the leaders the nodes agree on
	records, acked := ft.ledger.verify(ft.ctx, ft.t, ft.seeds(), ft.topic, ft.partitions)
	ft.t.Logf("figures: %d nodes, %d cycles, %d faults, %d records, %d acknowledged (acks=all), %d partitions × RF%d",
		len(ft.nodes), *faultCycles, faults, records, acked, ft.partitions, ft.rf)
}

// logViewsOnFailure logs, when the test failed, the topic's partitions
// as each node answers for them (which node sent a client where) and the
// end of each node's log.
func (ft *faultTest) logViewsOnFailure() {
	if !ft.t.Failed() {
		return
	}
	for _, nd := range ft.nodes {
		v, err := nd.partitions(context.Background(), ft.t, ft.topic)
		ft.t.Logf("node %d answers: %v %v", nd.id, v, err)
	}
	for _, nd := range ft.nodes {
		ft.t.Logf("node %d's log:\n%s", nd.id, nd.logTail())
	}
}

// partitionView is one partition as a node's metadata shows it.
type partitionView struct {
	leader, epoch int32
	replicas, isr []int32
}

// view asks the nodes in from (all when nil) for the topic's metadata,
// each in turn until one answers for every partition.
func (ft *faultTest) view(from []*node) (map[int32]partitionView, error) {
	if from == nil {
		from = ft.nodes
	}
	var lastErr error
	for _, nd := range from {
		v, err := nd.partitions(ft.ctx, ft.t, ft.topic)
		if err == nil && int32(len(v)) != ft.partitions {
			err = fmt.Errorf("node %d: %d partitions of %s", nd.id, len(v), ft.topic)
		}
		if err == nil {
			return v, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// waitView polls the metadata of the nodes in from until ok holds for it,
// and returns it.
func (ft *faultTest) waitView(from []*node, what string, ok func(map[int32]partitionView) bool) map[int32]partitionView {
	ft.t.Helper()
	for {
		v, err := ft.view(from)
		if err == nil && ok(v) {
			return v
		}
		if ft.ctx.Err() != nil {
			for _, nd := range ft.nodes {
				ft.t.Logf("node %d's log:\n%s", nd.id, nd.logTail())
			}
			ft.t.Fatalf("waiting for %s: %v; last view %v", what, err, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitHealthy waits until every partition has a leader and all of its
// replicas in sync as every node sees it, and every node names the same
// leader and epoch: a node that still says it leads an older epoch (a
// leader deposed while its loop was stuck, not yet aware of it) would
// answer a client with its own, older high watermark.
func (ft *faultTest) waitHealthy(what string) {
	ft.t.Helper()
	healthy := func(v map[int32]partitionView) bool {
		for _, pv := range v {
			if pv.leader < 0 || len(pv.replicas) != ft.rf || len(pv.isr) != ft.rf {
				return false
			}
		}
		return true
	}
	for {
		views := make([]map[int32]partitionView, len(ft.nodes))
		for i, nd := range ft.nodes {
			views[i] = ft.waitView([]*node{nd}, fmt.Sprintf("a healthy %s after %s, seen from node %d", ft.topic, what, nd.id), healthy)
		}
		disagreement := disagreeing(views)
		if disagreement == "" {
			return
		}
		if ft.ctx.Err() != nil {
			ft.t.Fatalf("waiting for the nodes to agree on the leaders of %s after %s: %s", ft.topic, what, disagreement)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// disagreeing describes the first partition whose leader or epoch the
// views (one per node, in node order) differ on; "" if they all agree.
func disagreeing(views []map[int32]partitionView) string {
	for p, first := range views[0] {
		for i, v := range views[1:] {
			if v[p].leader != first.leader || v[p].epoch != first.epoch {
				return fmt.Sprintf("partition %d: node 1 says node %d leads epoch %d, node %d says node %d leads epoch %d",
					p, first.leader, first.epoch, i+2, v[p].leader, v[p].epoch)
			}
		}
	}
	return ""
}

// waitListed waits until every node of from lists every node of want
// among the brokers of its Metadata: a client that keeps only the
// brokers an answer lists can still reach them.
func (ft *faultTest) waitListed(from, want []*node, what string) {
	ft.t.Helper()
	for _, nd := range from {
		var listed []int32
		for {
			ids, err := nd.brokers(ft.ctx, ft.t)
			if err == nil {
				listed = ids
				if !slices.ContainsFunc(want, func(w *node) bool { return !slices.Contains(ids, int32(w.id)) }) {
					break
				}
			}
			if ft.ctx.Err() != nil {
				ft.t.Fatalf("waiting for %s: node %d lists brokers %v, not all of %v", what, nd.id, listed, nodeIDs(want))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// nodeIDs are the ids of nodes.
func nodeIDs(nodes []*node) []int {
	ids := make([]int, len(nodes))
	for i, nd := range nodes {
		ids[i] = nd.id
	}
	return ids
}

// leaderOf waits for a leader of partition p other than not (-1: any),
// as the nodes in from see it.
func (ft *faultTest) leaderOf(from []*node, p, not int32) *node {
	ft.t.Helper()
	v := ft.waitView(from, fmt.Sprintf("a leader of %s-%d other than %d", ft.topic, p, not), func(v map[int32]partitionView) bool {
		return v[p].leader >= 0 && v[p].leader != not
	})
	return ft.nodes[v[p].leader-1]
}

// others are the nodes other than those given.
func (ft *faultTest) others(not ...*node) []*node { return without(ft.nodes, not...) }

// without is nodes less those given.
func without(nodes []*node, not ...*node) []*node {
	return slices.DeleteFunc(slices.Clone(nodes), func(nd *node) bool { return slices.Contains(not, nd) })
}

// partitions asks this node alone (no routing by the client) for the
// partitions of topic as it sees them.
func (nd *node) partitions(ctx context.Context, t *testing.T, topic string) (map[int32]partitionView, error) {
	resp, err := nd.metadata(ctx, t, topic)
	if err != nil {
		return nil, err
	}
	v := map[int32]partitionView{}
	for _, td := range resp.Topics {
		if err := kerr.ErrorForCode(td.ErrorCode); err != nil {
			return nil, fmt.Errorf("node %d: %s: %w", nd.id, topic, err)
		}
		for _, pd := range td.Partitions {
			v[pd.Partition] = partitionView{pd.Leader, pd.LeaderEpoch, pd.Replicas, pd.ISR}
		}
	}
	return v, nil
}

// brokers asks this node alone for the brokers its Metadata lists.
func (nd *node) brokers(ctx context.Context, t *testing.T) ([]int32, error) {
	resp, err := nd.metadata(ctx, t)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	return ids, nil
}

// metadata sends one Metadata request for topics to this node alone.
func (nd *node) metadata(ctx context.Context, t *testing.T, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(nd.kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", nd.id, err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// signal sends sig to the node's process.
func (nd *node) signal(sig syscall.Signal) {
	nd.t.Helper()
	if err := nd.cmd.Process.Signal(sig); err != nil {
		nd.t.Fatalf("node %d: %v: %v", nd.id, sig, err)
	}
}

// pause stops the node with SIGSTOP and returns once every thread of its
// process has stopped: a request sent after that is read only once the
// node resumes.
func (nd *node) pause() {
	nd.t.Helper()
	nd.signal(syscall.SIGSTOP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		stopped, err := allThreadsStopped(nd.cmd.Process.Pid)
		switch {
		case err != nil:
			nd.t.Fatalf("node %d: is it stopped? %v", nd.id, err)
		case stopped:
			return
		case time.Now().After(deadline):
			nd.t.Fatalf("node %d: not every thread stopped within 10 s of SIGSTOP", nd.id)
		}
		time.Sleep(time.Millisecond)
	}
}

// terminate stops the node with SIGTERM, as a rolling restart does, and
// waits for it to exit.
func (nd *node) terminate() {
	nd.t.Helper()
	nd.signal(syscall.SIGTERM)
	select {
	case <-nd.exited:
	case <-time.After(30 * time.Second):
		nd.t.Fatalf("node %d did not exit within 30 s of SIGTERM:\n%s", nd.id, nd.logTail())
	}
}

// produceTo sends one acks=all Produce request of value to partition p of
// topic straight to broker id, with no retry and no re-routing, and
// returns the partition's error code (nil: acknowledged).
func produceTo(ctx context.Context, cl *kgo.Client, id int32, topic string, topicID [16]byte, p int32, value []byte) (error, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, int32(faultAckTimeout/time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, oneRecordBatch(value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, t := range resp.(*kmsg.ProduceResponse).Topics {
		for _, rp := range t.Partitions {
			return kerr.ErrorForCode(rp.ErrorCode), nil
		}
	}
	return nil, fmt.Errorf("produce to broker %d: no partition in the answer", id)
}

// oneRecordBatch is a record batch (magic 2) of one record, no producer id.
func oneRecordBatch(value []byte) []byte {
	r := kmsg.Record{Value: value, Key: nil, TimestampDelta64: 0}
	r.Length = int32(len(r.AppendTo(nil)) - 1) // the bytes after the one-byte length
	records := r.AppendTo(nil)
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{
		Length:         int32(49 + len(records)), // the batch header after Length, then the records
		Magic:          2,
		FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1,
		Records:    records,
	}
	b := rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}
