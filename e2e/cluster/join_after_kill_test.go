package cluster

import (
	"context"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// joinAfterKillBound is how long after the metadata group elects a new
// leader a node joining meanwhile may take to serve, with room for a
// shared machine: the join's metadata record, forwarded to the dead
// leader, used to wait out the 30 s metadata write timeout instead, and
// the joining node then gave up.
const joinAfterKillBound = 10 * time.Second

// TestJoinRightAfterControllerKill (issue 13): the metadata group's
// leader (the controller) is killed -9 and a fourth node is started at
// once with --join naming a surviving node, whose write of the join
// goes to the leader it knows, the dead one. It must give that forward
// up once an election starts and send it to the new leader, so that the
// new node serves within joinAfterKillBound of the election.
func TestJoinRightAfterControllerKill(t *testing.T) {
	ctx, killed, survivors := startToKillController(t)
	fourth := joiningNode(t, survivors[0], 4)
	logsOnFailure(t, []*node{fourth})

	killAt := time.Now()
	killed.kill()
	fourth.start()
	elected, served := awaitElectionAndServe(ctx, t, survivors, killed.id, fourth)
	t.Logf("node %d (the controller) killed; a new controller %v later; node 4, joining through node %d, served %v later",
		killed.id, elected.Sub(killAt).Round(time.Millisecond), survivors[0].id, served.Sub(killAt).Round(time.Millisecond))
	if took := served.Sub(elected); took > joinAfterKillBound {
		t.Errorf("node 4 served %v after the new controller was elected, more than %v", took.Round(time.Millisecond), joinAfterKillBound)
	}
}

// startToKillController starts three nodes and returns a context for the
// test (50 s), the node that is the controller and the two others; it
// skips the test with -short.
func startToKillController(t *testing.T) (ctx context.Context, controller *node, others []*node) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	nodes := startCluster(t, 3)
	logsOnFailure(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	controller = nodes[awaitController(ctx, t, nodes, 0)-1]
	others = slices.DeleteFunc(slices.Clone(nodes), func(nd *node) bool { return nd == controller })
	return ctx, controller, others
}

// awaitController waits until one of nodes names a controller other
// than not in its Metadata, and returns its id.
func awaitController(ctx context.Context, t *testing.T, nodes []*node, not int32) int {
	t.Helper()
	for {
		for _, nd := range nodes {
			if id := controllerOf(ctx, t, nd); id > 0 && id != not {
				return int(id)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no node names a controller other than %d", not)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// controllerOf is the controller nd's Metadata names (-1 for none, or if
// nd does not answer).
func controllerOf(ctx context.Context, t *testing.T, nd *node) int32 {
	md, err := nd.metadata(ctx, t)
	if err != nil {
		return -1
	}
	return md.ControllerID
}

// awaitElectionAndServe waits until a survivor names a controller other
// than killed and joining serves, and returns when each happened.
func awaitElectionAndServe(ctx context.Context, t *testing.T, survivors []*node, killed int, joining *node) (elected, served time.Time) {
	t.Helper()
	for elected.IsZero() || served.IsZero() {
		if id := controllerOf(ctx, t, survivors[0]); elected.IsZero() && id > 0 && id != int32(killed) {
			elected = time.Now()
		}
		if served.IsZero() {
			if c, err := net.DialTimeout("tcp", joining.kafkaAddr, 250*time.Millisecond); err == nil {
				c.Close()
				served = time.Now()
			}
		}
		select {
		case <-joining.exited:
			t.Fatalf("node %d exited before serving:\n%s", joining.id, joining.logTail())
		case <-ctx.Done():
			t.Fatalf("elected at %v, served at %v: %v", elected, served, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return elected, served
}

// statusBound is how long `wharf cluster status` may take on a loaded
// machine against a node that answers: it used to wait out its 15 s
// admin timeout on a request routed to a controller that was gone.
const statusBound = 5 * time.Second

// TestClusterStatusWithoutController: two of three nodes killed -9, the
// survivor's metadata group has no leader and can elect none. `wharf
// cluster status` against the survivor (its Kafka listener and, for the
// quorum queue declared before, its management API) answers within
// statusBound, at once (when the survivor still names the dead
// controller) and once the survivor knows it is gone, saying then that
// the controller is unknown.
func TestClusterStatusWithoutController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	nodes := startAPICluster(t, 3)
	procs := make([]*node, len(nodes))
	for i, nd := range nodes {
		procs[i] = nd.node
	}
	logsOnFailure(t, procs)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	survivor := nodes[awaitController(ctx, t, procs, 0)%3] // not the controller
	ch := channel(t, dialAMQP(t, survivor.amqp))
	if _, err := ch.QueueDeclare("status-q", true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	for _, nd := range procs {
		if nd != survivor.node {
			nd.kill()
		}
	}
	status := func(when string) string {
		t.Helper()
		start := time.Now()
		out, err := exec.CommandContext(ctx, survivor.bin, "cluster", "status", "--bootstrap-server", survivor.kafkaAddr,
			"--http-server", survivor.http).CombinedOutput()
		took := time.Since(start)
		t.Logf("wharf cluster status %s: %v after %v", when, err, took.Round(time.Millisecond))
		if err != nil || took > statusBound || !strings.Contains(string(out), "status-q") {
			t.Fatalf("wharf cluster status %s: %v after %v, want an answer listing status-q within %v\n%s",
				when, err, took.Round(time.Millisecond), statusBound, out)
		}
		return string(out)
	}
	status("right after the kills")
	for controllerOf(ctx, t, survivor.node) != -1 {
		if ctx.Err() != nil {
			t.Fatalf("node %d still names controller %d", survivor.id, controllerOf(ctx, t, survivor.node))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := status("once the survivor names no controller"); !strings.Contains(out, "controller unknown") {
		t.Errorf("wharf cluster status does not say the controller is unknown:\n%s", out)
	}
}
