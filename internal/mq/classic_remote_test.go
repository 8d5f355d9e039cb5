package mq

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// nodeCalls plays the cluster's node calls: a call goes straight to the
// called registry's handler, unless that node is down (then it waits for
// its context, as a call to a dead node does).
type nodeCalls struct {
	mu       sync.Mutex
	handlers map[int32]func(ctx context.Context, from int32, data []byte) ([]byte, error)
	down     map[int32]bool
	removed  map[int32]bool  // nodes removed from the cluster: not among its Nodes
	sent     []remoteRequest // every request sent, in order
	// held, if set for a node, holds the calls to it (in contact) until
	// it is closed.
	held map[int32]chan struct{}
}

// hold holds the calls to node until the returned func is called (at the
// test's end at the latest).
func (c *nodeCalls) hold(t *testing.T, node int32) (release func()) {
	ch := make(chan struct{})
	c.mu.Lock()
	c.held[node] = ch
	c.mu.Unlock()
	release = sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release)
	return release
}

// remove removes node from the cluster's nodes.
func (c *nodeCalls) remove(node int32) {
	c.mu.Lock()
	c.removed[node] = true
	c.mu.Unlock()
}

// nodes are ids but the removed ones.
func (c *nodeCalls) nodes(ids []int32) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(ids), func(id int32) bool { return c.removed[id] })
}

func (c *nodeCalls) setDown(node int32, down bool) {
	c.mu.Lock()
	c.down[node] = down
	c.mu.Unlock()
}

func (c *nodeCalls) ops(op remoteOp) []remoteRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(c.sent), func(r remoteRequest) bool { return r.Op != op })
}

// config wires node's cluster config to the others.
func (c *nodeCalls) config(cc *ClusterConfig, node int32) {
	cc.HandleCalls = func(fn func(ctx context.Context, from int32, data []byte) ([]byte, error)) {
		c.mu.Lock()
		c.handlers[node] = fn
		c.mu.Unlock()
	}
	cc.PeerUp = func(peer int32) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.down[peer]
	}
	cc.CallNode = func(ctx context.Context, to int32, data []byte) ([]byte, error) {
		var req remoteRequest
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.sent = append(c.sent, req)
		fn, down, held := c.handlers[to], c.down[to], c.held[to]
		c.mu.Unlock()
		if down || fn == nil {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if held != nil {
			select {
			case <-held:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return fn(ctx, node, data)
	}
}

// newClassicEnvs opens one registry per node over shared definitions,
// their node calls wired to each other.
func newClassicEnvs(t *testing.T, nodes int) ([]*env, *nodeCalls) {
	return newClassicEnvsTweaked(t, nodes, func(int32, *Config) {})
}

// newClassicEnvsTweaked is newClassicEnvs with tweak applied to each
// node's configuration (its Cluster set) before its registry opens.
func newClassicEnvsTweaked(t *testing.T, nodes int, tweak func(node int32, cfg *Config)) ([]*env, *nodeCalls) {
	c := newClusterDefs()
	calls := &nodeCalls{handlers: map[int32]func(context.Context, int32, []byte) ([]byte, error){}, down: map[int32]bool{},
		removed: map[int32]bool{}, held: map[int32]chan struct{}{}}
	envs := make([]*env, nodes)
	ids := make([]int32, nodes)
	for i := range ids {
		ids[i] = int32(i + 1)
	}
	for i := range envs {
		d := nodeDefs{c: c, node: int32(i + 1)}
		cc := d.cluster()
		calls.config(cc, d.node)
		cc.Nodes = func() []int32 { return calls.nodes(ids) }
		envs[i] = newEnv(t, func(cfg *Config) {
			cfg.Definitions, cfg.Cluster = d, cc
			tweak(d.node, cfg)
		})
	}
	return envs, calls
}

// TestClassicQueueUsedFromAnotherNode: node 2 publishes to node 1's
// classic queue (confirmed once node 1 has it durable), counts, gets,
// requeues, consumes, acks and purges it there.
func TestClassicQueueUsedFromAnotherNode(t *testing.T) {
	envs, _ := newClassicEnvs(t, 2)
	home, other := envs[0], envs[1]
	home.declareQueue("billing", true)
	if n := other.messages("billing"); n != 0 { // node 2 follows the declare
		t.Fatalf("a passive declare on node 2 counts %d messages", n)
	}
	for _, body := range bodies("m", 4) {
		waitDurable(t, other.publish(persistent("", "billing", body)))
	}
	waitDurable(t, other.publish(msg("", "billing", "transient"))) // in memory on node 1, confirmed once there
	if n := home.messages("billing"); n != 5 {
		t.Fatalf("node 1 holds %d messages, want 5", n)
	}
	if n := other.messages("billing"); n != 5 {
		t.Fatalf("a passive declare on node 2 counts %d messages, want node 1's 5", n)
	}

	d, ok, err := other.v.Get("billing", false, 1)
	if err != nil || !ok || string(d.Message.Body) != "m0" {
		t.Fatalf("basic.get on node 2: %v %v", ok, err)
	}
	if err := other.v.Requeue("billing", d.Tag); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the requeued message back on node 1", func() bool { return home.messages("billing") == 5 })

	c := newConsumer(-1)
	sub := other.consume("billing", c, false)
	eventually(t, "five deliveries on node 2", func() bool { return len(c.deliveries()) == 5 })
	ds := c.deliveries()
	if got := c.bodies(); !slices.Equal(got, []string{"m0", "m1", "m2", "m3", "transient"}) || !ds[0].Redelivered || ds[1].Redelivered {
		t.Fatalf("node 2's consumer got %q (redelivered: first %v, second %v)", got, ds[0].Redelivered, ds[1].Redelivered)
	}
	for _, d := range ds {
		if err := other.v.Ack("billing", d.Tag); err != nil {
			t.Fatal(err)
		}
	}
	sub.Cancel()
	eventually(t, "node 2's consumer gone on node 1, its acks taken", func() bool {
		q := home.queueNamed("billing")
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.consumers) == 0 && len(q.unacked) == 0 && q.ready.Len() == 0
	})

	waitDurable(t, other.publish(persistent("", "billing", "p")))
	if n, err := other.v.PurgeQueue("billing", 1); err != nil || n != 1 {
		t.Fatalf("purge on node 2: %d, %v; want 1", n, err)
	}
	if n := home.messages("billing"); n != 0 {
		t.Fatalf("node 1 holds %d messages after node 2's purge", n)
	}
}

// TestClassicQueueDeletedOnItsHomeNode: a delete on another node is the
// home node's, which checks if-empty and if-unused against the queue
// itself; the other node has followed the delete when it answers.
func TestClassicQueueDeletedOnItsHomeNode(t *testing.T) {
	envs, _ := newClassicEnvs(t, 2)
	home, other := envs[0], envs[1]
	home.declareQueue("billing", true)
	waitDurable(t, home.publish(persistent("", "billing", "x")))
	_, err := other.v.DeleteQueue("billing", false, true, 1)
	wantCode(t, err, amqpwire.CodePreconditionFailed, "PRECONDITION_FAILED - queue 'billing' in vhost '/' not empty")
	n, err := other.v.DeleteQueue("billing", false, false, 1)
	if err != nil || n != 1 {
		t.Fatalf("delete on node 2: %d, %v; want node 1's 1 message", n, err)
	}
	if other.v.queue("billing") != nil || home.v.queue("billing") != nil {
		t.Fatal("the queue is still there after its delete-ok")
	}
	if n, err := other.v.DeleteQueue("billing", false, false, 1); err != nil || n != 0 {
		t.Fatalf("delete of a deleted queue: %d, %v", n, err)
	}
}

// TestClassicQueueHomeNodeDown: while the home node is out of contact, a
// declare, consume, get, purge or conditional delete on another node
// answers RabbitMQ's 404; a message routed to the queue is not routed
// there (unroutable, as RabbitMQ treats it); a consumer through it is
// cancelled. Back in contact, the queue serves again.
func TestClassicQueueHomeNodeDown(t *testing.T) {
	envs, calls := newClassicEnvs(t, 2)
	home, other := envs[0], envs[1]
	home.declareQueue("billing", true)
	waitDurable(t, home.publish(persistent("", "billing", "kept")))
	c := newConsumer(0) // takes nothing
	other.consume("billing", c, false)

	calls.setDown(1, true)
	const down = "NOT_FOUND - home node 'wharf@1' of durable queue 'billing' in vhost '/' is down or inaccessible"
	_, err := other.v.DeclareQueue(QueueDef{Name: "billing", Durable: true}, true)
	wantCode(t, err, amqpwire.CodeNotFound, down)
	_, err = other.v.DeclareQueue(QueueDef{Name: "billing", Durable: true}, false)
	wantCode(t, err, amqpwire.CodeNotFound, down)
	_, err = other.v.Consume("billing", ConsumeSpec{Consumer: newConsumer(1)})
	wantCode(t, err, amqpwire.CodeNotFound, down)
	_, _, err = other.v.Get("billing", false, 1)
	wantCode(t, err, amqpwire.CodeNotFound, down)
	_, err = other.v.PurgeQueue("billing", 1)
	wantCode(t, err, amqpwire.CodeNotFound, down)
	_, err = other.v.DeleteQueue("billing", true, false, 1)
	wantCode(t, err, amqpwire.CodeNotFound, down)
	if res := other.publish(persistent("", "billing", "lost")); res.Routed != 0 || res.Durable.Pending() {
		t.Fatalf("publish to a queue whose node is down: %+v, want not routed", res)
	}
	eventually(t, "node 2's consumer cancelled", func() bool { return c.cancelled.Load() == 1 })

	calls.setDown(1, false)
	if _, err := other.v.DeclareQueue(QueueDef{Name: "billing", Durable: true}, true); err != nil {
		t.Fatalf("passive declare on node 2 with node 1 back in contact: %v", err)
	}
	q := home.queueNamed("billing") // the message may still be held by the cancelled consumer's session there
	q.mu.Lock()
	held := q.ready.Len() + len(q.unacked)
	q.mu.Unlock()
	if held != 1 {
		t.Fatalf("node 1's queue holds %d messages, want 1", held)
	}
}

// TestForwardsSentInOrder: a forward that took over from a full one is
// sent only once that one was answered, even if its Sync comes first
// (a syncer round syncs its targets in parallel): the queue takes the
// messages in the order they were published.
func TestForwardsSentInOrder(t *testing.T) {
	envs, calls := newClassicEnvs(t, 2)
	envs[0].declareQueue("billing", true)
	envs[1].messages("billing") // node 2 has the queue
	rq := envs[1].queueNamed("billing").remote
	big := strings.Repeat("x", callBytes/2+1)
	first := rq.forwardBatch(newStoredMessage(persistent("", "billing", "1"+big), nil, 1).encoded())
	second := rq.forwardBatch(newStoredMessage(persistent("", "billing", "2"+big), nil, 1).encoded())
	if first == second {
		t.Fatal("one forward holds both batches")
	}
	if err := second.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := first.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := len(calls.ops(opPublish)); n != 2 {
		t.Fatalf("%d forwards sent, want 2", n)
	}
	got := envs[0].drain("billing")
	if len(got) != 2 || got[0][0] != '1' || got[1][0] != '2' {
		t.Fatalf("node 1's queue holds %d messages, first %c; want 2, in the order published", len(got), got[0][0])
	}
}

// TestClassicForwardRepeatedAfterHomeCrash: a classic queue's home node
// takes a forward repeated with the same id once, but its ids are in
// memory only: repeated after the home node crashed and restarted, the
// forward is enqueued again. At least once, never lost, as documented
// (docs/replication.md): RabbitMQ nacks a publish whose classic queue's
// node failed, and its publisher's republish is a duplicate too.
func TestClassicForwardRepeatedAfterHomeCrash(t *testing.T) {
	envs, _ := newClassicEnvs(t, 2)
	home := envs[0]
	home.declareQueue("billing", true)
	m := persistent("", "billing", "m")
	props, err := encodeProperties(m) // persistent: logged, and there after the crash
	if err != nil {
		t.Fatal(err)
	}
	req := &remoteRequest{Op: opPublish, Queue: home.queueNamed("billing").id, VHost: "/", Name: "billing",
		Batches: newStoredMessage(m, props, 1).encoded(), Forward: 42}
	serve := func() {
		t.Helper()
		if r := home.r.serveClassic(context.Background(), req); r.Error != "" || r.NotServed {
			t.Fatalf("forward 42: %+v", r)
		}
	}
	serve()
	serve() // its answer lost: taken once
	if n := home.messages("billing"); n != 1 {
		t.Fatalf("node 1 holds %d messages after a repeated forward, want 1", n)
	}
	home.crash()
	serve()
	if got := home.drain("billing"); !slices.Equal(got, []string{"m", "m"}) {
		t.Fatalf("after node 1's crash and the forward's repeat it holds %q, want the message twice", got)
	}
}

// TestLocalConfirmNotHeldByForward: while node 2's forward to node 1's
// classic queue waits for node 1's answer, a message node 2 published
// next to its own durable queue is confirmed: a forward is not part of
// the syncer's rounds, whose fsyncs every confirm of the node shares.
// The forward is confirmed once node 1 answers.
func TestLocalConfirmNotHeldByForward(t *testing.T) {
	envs, calls := newClassicEnvs(t, 2)
	envs[0].declareQueue("remote", true)
	envs[1].declareQueue("local", true)
	envs[1].messages("remote") // node 2 has the queue
	release := calls.hold(t, 1)
	forwarded := envs[1].publish(persistent("", "remote", "f"))
	local := envs[1].publish(persistent("", "local", "l"))
	select {
	case <-local.Durable.Done():
		if err := local.Durable.Err(); err != nil {
			t.Fatal(err)
		}
	case <-forwarded.Durable.Done():
		t.Fatalf("the forward was answered while node 1's answer was held: %v", forwarded.Durable.Err())
	case <-time.After(syncWaitRemote - 2*time.Second):
		t.Fatal("the local queue's confirm waits for the forward")
	}
	release()
	waitDurable(t, forwarded)
	if got := envs[0].drain("remote"); !slices.Equal(got, []string{"f"}) {
		t.Fatalf("node 1's queue holds %q", got)
	}
}

// TestPublishToQueueDeclaredElsewhereJustNow: a publish to the default
// exchange naming a queue this node has not heard of yet (declared on
// another node, whose declare-ok came once the cluster committed it)
// catches up before it counts as unroutable: here node 2 hears of no
// write by itself, and the message still reaches node 1's new queue.
// So does one that names it in CC beside a queue node 2 knows: the
// known queue must not hide the missing one, which the message would
// miss, confirmed.
func TestPublishToQueueDeclaredElsewhereJustNow(t *testing.T) {
	for name, tc := range map[string]struct {
		key    string   // the routing key
		cc     []any    // the CC header
		routed int      // the queues the message reaches
		local  []string // node 2's own queues
	}{
		"routing key":         {key: "billing", routed: 1},
		"CC beside its queue": {key: "audit", cc: []any{"billing"}, routed: 2, local: []string{"audit"}},
	} {
		t.Run(name, func(t *testing.T) {
			envs, _ := newClassicEnvsTweaked(t, 2, func(node int32, cfg *Config) {
				if node == 2 {
					cfg.Cluster.Watch = func(func(string)) {} // a node that lags: it follows only when it catches up
				}
			})
			home, lagging := envs[0], envs[1]
			for _, q := range tc.local {
				lagging.declareQueue(q, true)
			}
			home.declareQueue("billing", true)
			m := persistent("", tc.key, "first")
			if tc.cc != nil {
				m.Properties.Headers = amqpwire.Table{"CC": tc.cc}
			}
			res := lagging.publish(m)
			if res.Routed != tc.routed {
				t.Fatalf("routed to %d queues, want %d, node 1's new one among them", res.Routed, tc.routed)
			}
			waitDurable(t, res)
			if got := home.drain("billing"); len(got) != 1 || got[0] != "first" {
				t.Fatalf("node 1's queue holds %q", got)
			}
		})
	}
}
