package cluster

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The AMQP fault tests (issue 14): Jepsen's total-queue test of RabbitMQ
// quorum queues, against `wharf serve` processes. Three quorum queues,
// each replicated to every node; on every node a publisher with confirms
// (round robin over the queues) and a consumer with manual acks (of
// every queue), each reconnecting elsewhere when its node fails; a
// nemesis injects one kind of fault -cluster.cycles times, each time
// waiting for the queues to make progress during the fault and after it.
// Then publishing stops, the consumers drain the queues (drain), and the
// checker (amqp_history_fault_test.go) requires lost = stranded =
// unexpected = 0 and reports duplicates. Each test logs one "figures:"
// line.

// amqpFaultContext bounds one AMQP fault test, cluster start and drain
// included, whatever -cluster.cycles says: a cycle takes ten to thirty
// seconds here, so a few fit.
func amqpFaultContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// faultQueues is how many quorum queues a test spreads over the nodes.
const faultQueues = 3

// amqpFaultTest is one AMQP fault test's cluster, queues and history.
type amqpFaultTest struct {
	t      *testing.T
	ctx    context.Context
	nodes  []*node
	addrs  []string // AMQP, by node
	queues []string
	h      *totalQueue
}

// startAMQPFaultCluster starts n nodes on loopback, each with an AMQP
// listener and the test user.
func startAMQPFaultCluster(t *testing.T, n int) ([]*node, []string) {
	t.Helper()
	nodes := prepareCluster(t, n)
	addrs := make([]string, n)
	for i, nd := range nodes {
		addrs[i] = freeAddr(t)
		nd.extraArgs = append([]string{"--amqp-addr", addrs[i]}, faultUserArgs...)
	}
	startAll(nodes)
	return nodes, addrs
}

// newAMQPFaultTest declares the quorum queues, each with a member on
// every node.
func newAMQPFaultTest(ctx context.Context, t *testing.T, nodes []*node, addrs []string) *amqpFaultTest {
	t.Helper()
	ft := &amqpFaultTest{t: t, ctx: ctx, nodes: nodes, addrs: addrs}
	for i := range faultQueues {
		ft.queues = append(ft.queues, fmt.Sprintf("jepsen-%d", i))
	}
	ft.h = newTotalQueue(ft.queues)
	args := amqp.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int64(len(nodes))}
	for {
		err := ft.declare(args)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			ft.logNodes()
			t.Fatalf("declaring the queues: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range ft.queues {
		t.Logf("node %d leads %s", ft.leader(i).id, ft.queues[i])
	}
	return ft
}

// declare declares the queues on the first node.
func (ft *amqpFaultTest) declare(args amqp.Table) error {
	conn, ch, err := openChannel(ft.addrs[0])
	if err != nil {
		return err
	}
	defer conn.drop()
	for _, q := range ft.queues {
		if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
			return err
		}
	}
	return nil
}

// run starts the clients, waits for their first confirms and deliveries,
// runs cycle -cluster.cycles times, stops the publishers, lets the
// consumers drain the queues and runs the checker.
func (ft *amqpFaultTest) run(fault string, cycle func()) {
	ft.t.Helper()
	pctx, stopPublishers := context.WithCancel(ft.ctx)
	stopConsumers := ft.consume()
	waitPublishers := runClients(pctx, ft.clients("p"), publishSession(ft.h, ft.queues))
	ft.t.Cleanup(func() { // also when the test fails half-way; runs before the nodes are killed
		stopPublishers()
		waitPublishers()
	})
	ft.progress(100, "the first confirms and deliveries")
	for range *faultCycles {
		cycle()
	}
	stopPublishers()
	waitPublishers()
	ft.drain(stopConsumers)
	v := ft.h.verdict()
	ft.t.Logf("figures: %s, %d nodes, %d quorum queues, %d cycles: %v", fault, len(ft.nodes), len(ft.queues), *faultCycles, v)
	v.check(ft.t)
}

// clients are one client at home on each node, named prefix1, prefix2, ….
func (ft *amqpFaultTest) clients(prefix string) []faultClient {
	var cs []faultClient
	for i := range ft.nodes {
		cs = append(cs, faultClient{name: fmt.Sprintf("%s%d", prefix, i+1), addrs: ft.addrs, home: i})
	}
	return cs
}

// consume starts a consumer at home on each node; stop stops them and
// waits for them (also at the test's end).
func (ft *amqpFaultTest) consume() (stop func()) {
	ctx, cancel := context.WithCancel(ft.ctx)
	wait := runClients(ctx, ft.clients("c"), consumeSession(ft.h, ft.queues))
	stop = sync.OnceFunc(func() {
		cancel()
		wait()
	})
	ft.t.Cleanup(stop)
	return stop
}

// drainWait is how long the consumers that ran through the faults get
// to consume every confirmed message: longer than a leader keeps a
// silent node's session (10 s), whose messages it then returns.
const drainWait = 20 * time.Second

// drain waits until the consumers have consumed every confirmed message.
// Those they have not after drainWait are stranded: stop stops those
// consumers (their connections close, which returns what they held) and
// new ones drain what the queues still have.
func (ft *amqpFaultTest) drain(stop func()) {
	ft.t.Helper()
	ctx, cancel := context.WithTimeout(ft.ctx, drainWait)
	defer cancel()
	err := ft.h.waitDrained(ctx)
	stop()
	if err == nil {
		return
	}
	ft.h.markStranded()
	ft.t.Logf("%v after %v with the consumers that ran through the faults; draining with new ones", err, drainWait)
	stopFresh := ft.consume()
	defer stopFresh()
	if err := ft.h.waitDrained(ft.ctx); err != nil {
		ft.t.Logf("new consumers: %v", err)
		ft.logNodes()
	}
}

// progress waits until every queue has n more messages confirmed and n
// more consumed than now.
func (ft *amqpFaultTest) progress(n int, what string) {
	ft.t.Helper()
	if err := ft.h.waitProgress(ft.ctx, ft.h.mark(), n); err != nil {
		ft.logNodes()
		ft.t.Fatalf("%s: %v", what, err)
	}
}

// leader waits until a node serves queue i (the nodes' logs say so)
// and returns it.
func (ft *amqpFaultTest) leader(i int) *node {
	ft.t.Helper()
	return ft.nodes[queueLeader(ft.t, ft.ctx, ft.nodes, nil, ft.queues[i])]
}

// successor waits until a node other than those down serves queue i
// from a term above old's (a node killed while it led, then restarted,
// last said it served the queue) and returns it.
func (ft *amqpFaultTest) successor(i int, old *node, down ...*node) *node {
	ft.t.Helper()
	skip := map[int]bool{}
	for _, nd := range down {
		skip[nd.id-1] = true
	}
	_, term := old.lastWordOn(ft.queues[i])
	next, _ := queueLeaderAbove(ft.t, ft.ctx, ft.nodes, skip, ft.queues[i], term)
	return ft.nodes[next]
}

// waitDeposed waits until nd's log says it no longer serves queue i.
func (ft *amqpFaultTest) waitDeposed(nd *node, i int) {
	ft.t.Helper()
	waitFor(ft.t, ft.ctx, fmt.Sprintf("node %d to stop serving %s", nd.id, ft.queues[i]), func() bool {
		serving, _ := nd.lastWordOn(ft.queues[i])
		return !serving
	})
}

// restart starts nd again and waits until a message published on it to
// each queue is confirmed: it is a member again, and knows every
// queue's leader.
func (ft *amqpFaultTest) restart(nd *node) {
	ft.t.Helper()
	nd.start()
	nd.waitReady()
	for _, q := range ft.queues {
		for {
			err := confirmOne(ft.ctx, ft.h, ft.addrs[nd.id-1], fmt.Sprintf("probe%d", nd.id), q)
			if err == nil {
				break
			}
			if ft.ctx.Err() != nil {
				ft.logNodes()
				ft.t.Fatalf("publishing to %s on node %d after its restart: %v", q, nd.id, err)
			}
		}
	}
}

// logNodes logs the end of every node's log.
func (ft *amqpFaultTest) logNodes() {
	for _, nd := range ft.nodes {
		ft.t.Logf("node %d's log:\n%s", nd.id, nd.logTail())
	}
}

// runAMQPFault runs an AMQP fault test on n loopback nodes: cycle is one
// cycle of its fault.
func runAMQPFault(t *testing.T, n int, fault string, cycle func(*amqpFaultTest)) {
	t.Helper()
	requireFaultRun(t)
	ctx := amqpFaultContext(t)
	nodes, addrs := startAMQPFaultCluster(t, n)
	ft := newAMQPFaultTest(ctx, t, nodes, addrs)
	ft.run(fault, func() { cycle(ft) })
}

// killLeaderAnd kills the leader of the first queue and others more
// nodes with SIGKILL at once, waits for the queues to go on without
// them, and restarts them.
func (ft *amqpFaultTest) killLeaderAnd(others int) {
	ft.t.Helper()
	leader := ft.leader(0)
	victims := append([]*node{leader}, without(ft.nodes, leader)[:others]...)
	for _, nd := range victims {
		nd.kill()
	}
	killedAt := time.Now()
	elected := ft.successor(0, leader, victims...)
	ft.t.Logf("killed nodes %v (node %d led %s); node %d leads %v later", nodeIDs(victims), leader.id, ft.queues[0],
		elected.id, time.Since(killedAt).Round(time.Millisecond))
	ft.progress(50, "with the nodes killed")
	for _, nd := range victims {
		ft.restart(nd)
	}
	ft.progress(50, "after the killed nodes restarted")
}

// TestAMQPLeaderKilledFault: the leader of a quorum queue is killed with
// SIGKILL, the queues go on on the other two, and it is restarted.
func TestAMQPLeaderKilledFault(t *testing.T) {
	runAMQPFault(t, 3, "leader killed", func(ft *amqpFaultTest) { ft.killLeaderAnd(0) })
}

// TestAMQPTwoOfFiveKilledFault: five nodes; the leader of a quorum queue
// and another node are killed with SIGKILL at once. Three of five remain
// a majority of every queue's group: the queues go on, and both nodes
// catch up when restarted.
func TestAMQPTwoOfFiveKilledFault(t *testing.T) {
	runAMQPFault(t, 5, "two of five killed", func(ft *amqpFaultTest) { ft.killLeaderAnd(1) })
}

// TestAMQPFollowerKilledFault: a follower of a quorum queue is killed
// with SIGKILL and restarted; it catches up.
func TestAMQPFollowerKilledFault(t *testing.T) {
	runAMQPFault(t, 3, "follower killed", func(ft *amqpFaultTest) {
		leader := ft.leader(0)
		follower := without(ft.nodes, leader)[0]
		follower.kill()
		t.Logf("node %d (a follower of %s, led by node %d) killed", follower.id, ft.queues[0], leader.id)
		ft.progress(50, "with a follower killed")
		ft.restart(follower)
		ft.progress(50, "after the follower restarted")
	})
}

// TestAMQPLeaderStoppedFault: the leader of a quorum queue is stopped
// with SIGSTOP for three election timeouts; the other two elect a new
// one, and the old one, resumed, stops serving the queue.
func TestAMQPLeaderStoppedFault(t *testing.T) {
	runAMQPFault(t, 3, "leader stopped", func(ft *amqpFaultTest) {
		old := ft.leader(0)
		old.pause()
		stoppedAt := time.Now()
		elected := ft.successor(0, old, old)
		t.Logf("node %d (leading %s) stopped; node %d leads %v later", old.id, ft.queues[0], elected.id,
			time.Since(stoppedAt).Round(time.Millisecond))
		ft.progress(50, "while the old leader is stopped")
		select { // the fault itself: stopped for three election timeouts at least
		case <-time.After(time.Until(stoppedAt.Add(3 * electionTimeout))):
		case <-ft.ctx.Done():
		}
		old.signal(syscall.SIGCONT)
		ft.waitDeposed(old, 0)
		ft.progress(50, "after the old leader resumed")
	})
}

// TestAMQPRollingRestartFault: every node in turn is stopped with SIGTERM
// and started again, the next one once the restarted one confirms a
// publish to every queue and the queues made progress.
func TestAMQPRollingRestartFault(t *testing.T) {
	runAMQPFault(t, 3, "rolling restart", func(ft *amqpFaultTest) {
		for _, nd := range ft.nodes {
			nd.terminate()
			ft.restart(nd)
			ft.progress(30, fmt.Sprintf("after node %d restarted", nd.id))
		}
	})
}
