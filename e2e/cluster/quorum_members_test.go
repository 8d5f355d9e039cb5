package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Quorum queue membership (issue 14): placement on joined nodes, grow,
// shrink, remove-node, and what /api/queues shows of it.

// apiNode is a node with its AMQP and management API addresses.
type apiNode struct {
	*node
	amqp, http string
}

// withAPI gives nd AMQP and HTTP listeners (before it starts).
func withAPI(t *testing.T, nd *node) apiNode {
	a := apiNode{node: nd, amqp: freeAddr(t), http: freeAddr(t)}
	nd.extraArgs = append(nd.extraArgs, "--amqp-addr", a.amqp, "--http-addr", a.http)
	return a
}

// startAPICluster starts a cluster of n nodes, each with AMQP and HTTP
// listeners, and waits until they serve.
func startAPICluster(t *testing.T, n int) []apiNode {
	procs := prepareCluster(t, n)
	nodes := make([]apiNode, len(procs))
	for i, nd := range procs {
		nodes[i] = withAPI(t, nd)
	}
	startAll(procs)
	return nodes
}

// queueView is what /api/queues/{vhost}/{name} shows of a quorum queue.
type queueView struct {
	Node    string   `json:"node"`
	Leader  *string  `json:"leader"`
	Members []string `json:"members"`
	Online  []string `json:"online"`
}

func (a apiNode) queue(ctx context.Context, name string) (queueView, error) {
	var v queueView
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.http+"/api/queues/%2F/"+name, nil)
	if err != nil {
		return v, err
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("GET /api/queues/%%2F/%s: %s", name, resp.Status)
	}
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// wharfName is node id's name in the API.
func wharfName(id int) string { return "wharf@" + strconv.Itoa(id) }

// awaitMembers waits until every node's /api/queues shows queue with
// members (in any order), all online, and a leader among them; it
// returns the leader's id.
func awaitMembers(ctx context.Context, t *testing.T, nodes []apiNode, queue string, members ...int) int {
	t.Helper()
	want := make([]string, len(members))
	for i, id := range members {
		want[i] = wharfName(id)
	}
	slices.Sort(want)
	var last queueView
	var lastErr error
	for {
		leaders := map[string]bool{}
		ok := true
		for _, a := range nodes {
			v, err := a.queue(ctx, queue)
			last, lastErr = v, err
			if err != nil || v.Leader == nil || !slices.Equal(slices.Sorted(slices.Values(v.Members)), want) ||
				!slices.Equal(slices.Sorted(slices.Values(v.Online)), want) || !slices.Contains(want, *v.Leader) || v.Node != *v.Leader {
				ok = false
				break
			}
			leaders[*v.Leader] = true
		}
		if ok && len(leaders) == 1 {
			for name := range leaders {
				id, _ := strconv.Atoi(strings.TrimPrefix(name, "wharf@"))
				return id
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%q never showed members %v, a leader among them, on every node; last: %+v %v", queue, want, last, lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// joinFourth starts node 4 with --join to the three nodes, waits until
// every node lists four brokers, and returns the four (their logs shown
// if the test fails).
func joinFourth(ctx context.Context, t *testing.T, three []apiNode) []apiNode {
	t.Helper()
	fourth := withAPI(t, joiningNode(t, three[0].node, 4))
	fourth.start()
	fourth.waitReady()
	nodes := append(slices.Clone(three), fourth)
	logsOnFailure(t, []*node{nodes[0].node, nodes[1].node, nodes[2].node, fourth.node})
	for _, a := range nodes {
		waitBrokers(ctx, t, a.node, 4)
	}
	return nodes
}

// wharfCLI runs the wharf binary and fails the test if it fails.
func wharfCLI(ctx context.Context, t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("wharf %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("wharf %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// TestQuorumQueueMembership: three `wharf serve` processes and a fourth
// joined with --join. A quorum queue declared before the join is placed
// on the three; quorum queues declared after it spread their leaders
// over all four, the joined one included. Messages published with
// confirms; `wharf queues grow 4` adds the joined node as a member,
// `wharf queues shrink` removes the queue's leader (which hands its
// leadership on first), `wharf cluster remove-node 4` shrinks the queue
// off node 4 before the node goes; more messages published with
// confirms between the steps; then every confirmed message is consumed:
// lost 0. /api/queues on every node shows the leader, members and online
// members at each step, and `wharf cluster status` lists them.
func TestQuorumQueueMembership(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four broker processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	var nodes []apiNode
	for _, nd := range prepareCluster(t, 3) {
		nodes = append(nodes, withAPI(t, nd))
		nd.start()
	}
	for _, a := range nodes {
		a.waitReady()
	}
	const queue = "members"
	if _, err := channel(t, dialAMQP(t, nodes[0].amqp)).QueueDeclare(queue, true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}
	awaitMembers(ctx, t, nodes, queue, 1, 2, 3)
	confirmed := &confirmedSet{ids: map[int]bool{}}
	publish := func(a apiNode, from, to int) {
		t.Helper()
		if err := publishConfirmed(ctx, confirmChannel(t, a.amqp), queue, from, to, confirmed); err != nil {
			t.Fatalf("publishing %d..%d on node %d: %v", from, to, a.id, err)
		}
	}
	publish(nodes[1], 0, 200)

	nodes = joinFourth(ctx, t, nodes)
	fourth := nodes[3]
	// A joined node gets no replicas by itself (as in RabbitMQ); new
	// queues are placed on it, leaders on the least loaded nodes.
	ch := channel(t, dialAMQP(t, fourth.amqp))
	placed := map[int]bool{}
	for i := range 3 {
		name := fmt.Sprintf("single-%d", i)
		if _, err := ch.QueueDeclare(name, true, false, false, false,
			amqp.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": 1}); err != nil {
			t.Fatal(err)
		}
		v, err := fourth.queue(ctx, name)
		if err != nil || len(v.Members) != 1 {
			t.Fatalf("%s: %+v, %v", name, v, err)
		}
		id, _ := strconv.Atoi(strings.TrimPrefix(v.Members[0], "wharf@"))
		placed[id] = true
	}
	if len(placed) != 3 || !placed[4] {
		t.Errorf("three one-member queues declared after the join were placed on nodes %v; want three distinct, node 4 among them", placed)
	}
	for i := range 3 { // no one-member queue to stop remove-node
		if _, err := ch.QueueDelete(fmt.Sprintf("single-%d", i), false, false, false); err != nil {
			t.Fatal(err)
		}
	}
	publish(fourth, 200, 400)

	api := []string{"--http-server", nodes[2].http}
	wharfCLI(ctx, t, fourth.bin, append([]string{"queues", "grow", "4", "--queue-pattern", "^" + queue + "$"}, api...)...)
	leader := awaitMembers(ctx, t, nodes, queue, 1, 2, 3, 4)
	publish(nodes[0], 400, 600)

	wharfCLI(ctx, t, fourth.bin, append([]string{"queues", "shrink", strconv.Itoa(leader)}, api...)...)
	var rest []int
	for id := 1; id <= 4; id++ {
		if id != leader {
			rest = append(rest, id)
		}
	}
	newLeader := awaitMembers(ctx, t, nodes, queue, rest...)
	t.Logf("node %d led %q and was shrunk off; node %d leads", leader, queue, newLeader)
	publish(fourth, 600, 800)

	status := wharfCLI(ctx, t, fourth.bin, append([]string{"cluster", "status", "--bootstrap-server", fourth.kafkaAddr}, api...)...)
	if !strings.Contains(status, queue) || !strings.Contains(status, wharfName(newLeader)) {
		t.Errorf("wharf cluster status does not list %q led by %s:\n%s", queue, wharfName(newLeader), status)
	}

	var seeds []string
	for _, a := range nodes[:3] {
		seeds = append(seeds, a.kafkaAddr)
	}
	wharfCLI(ctx, t, fourth.bin, append([]string{"cluster", "remove-node", "4", "--bootstrap-server", strings.Join(seeds, ",")}, api...)...)
	remaining := slices.DeleteFunc(slices.Clone(rest), func(id int) bool { return id == 4 })
	awaitMembers(ctx, t, nodes[:3], queue, remaining...)
	consumer := nodes[remaining[0]-1]
	publish(consumer, 800, 1000)

	consumeConfirmed(ctx, t, consumer.amqp, queue, confirmed)
}

// consumeConfirmed consumes queue on the node at addr until it has as
// many messages as were confirmed, and fails the test if any confirmed
// one is not among them.
func consumeConfirmed(ctx context.Context, t *testing.T, addr, queue string, confirmed *confirmedSet) {
	t.Helper()
	conn, deliveries := consumeOn(t, addr, queue, 100)
	defer conn.Close()
	got := map[int]bool{}
	for len(got) < confirmed.len() {
		select {
		case d := <-deliveries:
			i, _ := strconv.Atoi(string(d.Body))
			got[i] = true
			d.Ack(false)
		case <-ctx.Done():
			t.Fatalf("consumed %d of %d confirmed messages", len(got), confirmed.len())
		}
	}
	confirmed.mu.Lock()
	defer confirmed.mu.Unlock()
	lost := 0
	for i := range confirmed.ids {
		if !got[i] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("lost %d of %d confirmed messages", lost, len(confirmed.ids))
	}
	t.Logf("confirmed %d, consumed %d, lost 0", len(confirmed.ids), len(got))
}
