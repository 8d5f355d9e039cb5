package mq

import (
	"slices"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/raft"
)

// placedLeader waits until the node placed to lead the quorum queue name
// (its first member: the first leader hands it the leadership while the
// queue is empty) serves it, and returns its index.
func placedLeader(t *testing.T, envs []*env, name string) int {
	t.Helper()
	var at int
	eventually(t, name+" served by its first member", func() bool {
		at = servingNode(t, envs, name)
		d, err := envs[at].v.QueueDetail(name)
		return err == nil && len(d.Members) > 0 && d.Members[0] == int32(at+1)
	})
	return at
}

// quorumRoles declares a quorum queue of size members on three nodes and
// returns the indexes of its leader, of another member (-1 if none) and
// of a node that holds no replica (-1 if none).
func quorumRoles(t *testing.T, envs []*env, name string, size int64) (leader, member, outsider int) {
	t.Helper()
	if _, err := envs[0].v.DeclareQueue(QueueDef{Name: name, Durable: true, Args: amqpwire.Table{
		"x-queue-type": "quorum", "x-quorum-initial-group-size": size}}, false); err != nil {
		t.Fatal(err)
	}
	leader, member, outsider = placedLeader(t, envs, name), -1, -1
	for i, e := range envs {
		switch {
		case i == leader:
		case e.queueNamed(name).quorum.Load() != nil:
			member = i
		default:
			outsider = i
		}
	}
	return leader, member, outsider
}

// TestQuorumConsumeAnywhere: a node that holds no replica of a quorum
// queue publishes to it (confirmed once the leader committed it) and
// consumes from it through the leader, within its prefetch, under its own
// tags; acks, requeues (redelivered, x-delivery-count 1) and basic.get
// from a member that does not lead go to the leader too.
func TestQuorumConsumeAnywhere(t *testing.T) {
	envs := newQuorumEnvs(t, 3, raft.NewMemNetwork())
	l, f, n := quorumRoles(t, envs, "q", 2)
	leader, member, outsider := envs[l], envs[f], envs[n]
	for _, body := range bodies("m", 3) {
		waitDurable(t, outsider.publish(persistent("", "q", body)))
	}
	if got := leader.messages("q"); got != 3 {
		t.Fatalf("the leader holds %d messages, want 3", got)
	}
	for i, e := range envs { // the outsider heard from the leader when it forwarded
		d, err := e.v.QueueDetail("q")
		if err != nil || d.Leader != int32(l+1) || len(d.Members) != 2 || slices.Contains(d.Members, int32(n+1)) {
			t.Fatalf("node %d: leader %d, members %v (%v); want leader %d, members without %d", i+1, d.Leader, d.Members, err, l+1, n+1)
		}
	}

	c := newConsumer(-1)
	sub, err := outsider.v.Consume("q", ConsumeSpec{Tag: "c", Conn: 1, Consumer: c, Prefetch: 2})
	if err != nil {
		t.Fatal(err)
	}
	sub.Resume()
	eventually(t, "two deliveries (the prefetch)", func() bool { return len(c.bodies()) == 2 })
	eventually(t, "the leader holds two for the consumer", func() bool {
		q := leader.queueNamed("q")
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.unacked) == 2 && q.ready.Len() == 1
	})
	first := c.deliveries()
	if len(c.bodies()) != 2 {
		t.Fatalf("deliveries beyond the prefetch: %q", c.bodies())
	}
	outsider.v.Ack("q", first[0].Tag)
	outsider.v.Requeue("q", first[1].Tag)
	eventually(t, "m2 and the requeued m1 delivered", func() bool { return len(c.bodies()) == 4 })
	got := c.deliveries()
	var again *Delivery
	for _, d := range got[2:] {
		if string(d.Message.Body) == "m1" {
			again = d
		}
	}
	if again == nil || !again.Redelivered || again.Message.Properties.Headers["x-delivery-count"] != int64(1) {
		t.Fatalf("the requeued message came back as %+v", again)
	}
	sub.Cancel()
	outsider.v.Requeue("q", got[2].Tag, got[3].Tag) // what a closing channel does

	eventually(t, "both back on the leader", func() bool { return leader.messages("q") == 2 })
	for range 2 {
		d, ok, err := member.v.Get("q", false, 1)
		if err != nil || !ok {
			t.Fatalf("basic.get on a member that does not lead: %v, %v", ok, err)
		}
		member.v.Ack("q", d.Tag)
	}
	if _, ok, err := member.v.Get("q", true, 1); ok || err != nil {
		t.Fatalf("basic.get of an empty queue: %v, %v", ok, err)
	}
	eventually(t, "every message settled on the leader", func() bool {
		q := leader.queueNamed("q")
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.unacked) == 0 && q.ready.Len() == 0
	})
}

// TestQuorumConsumerFollowsLeader: a consumer on a member that does not
// lead keeps consuming when the leader is cut off: the new leader returns
// what the old one handed it in a commit (redelivered, x-delivery-count
// 1) and serves it again, with no cancel.
func TestQuorumConsumerFollowsLeader(t *testing.T) {
	net := raft.NewMemNetwork()
	envs := newQuorumEnvs(t, 3, net)
	l, f, _ := quorumRoles(t, envs, "q", 3)
	member := envs[f]
	waitDurable(t, member.publish(persistent("", "q", "held")))
	c := newConsumer(-1)
	member.consume("q", c, false)
	eventually(t, "delivered through the leader", func() bool { return len(c.bodies()) == 1 })
	waitDurable(t, member.publish(persistent("", "q", "commits the delivery")))
	eventually(t, "second delivery", func() bool { return len(c.bodies()) == 2 })

	isolate(net, len(envs), l, true)
	waitDurable(t, member.publish(persistent("", "q", "after")))
	// "held" was delivered in a commit (the second message's enqueue
	// covers it); the second message's delivery may not have been.
	eventually(t, "held redelivered by the new leader, and the new message", func() bool {
		got := c.bodies()
		return slices.Contains(got, "after") && slices.Index(got[1:], "held") >= 0
	})
	for _, d := range c.deliveries()[1:] {
		if string(d.Message.Body) == "held" && (!d.Redelivered || d.Message.Properties.Headers["x-delivery-count"] != int64(1)) {
			t.Fatalf("held came back as redelivered=%v headers %v", d.Redelivered, d.Message.Properties.Headers)
		}
	}
	if c.cancelled.Load() != 0 {
		t.Fatal("the consumer was cancelled")
	}
}

// TestQuorumSilentConsumerNodeReturns: the leader returns what a
// consumer on another node held once that node is not heard from for
// sessionTimeout (it died, or was cut off), redelivered with
// x-delivery-count 1, to a consumer elsewhere.
func TestQuorumSilentConsumerNodeReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a session to expire (10 s)")
	}
	net := raft.NewMemNetwork()
	envs := newQuorumEnvs(t, 3, net)
	l, f, _ := quorumRoles(t, envs, "q", 3)
	leader, member := envs[l], envs[f]
	waitDurable(t, leader.publish(persistent("", "q", "held")))
	held := newConsumer(-1)
	member.consume("q", held, false)
	eventually(t, "delivered through the leader", func() bool { return len(held.bodies()) == 1 })

	for i := range envs { // cut off from both (cut off from the leader only, it could win an election)
		if i != f {
			net.Cut(uint64(f+1), uint64(i+1), true)
			net.Cut(uint64(i+1), uint64(f+1), true)
		}
	}
	c := newConsumer(-1)
	leader.consume("q", c, false)
	deadline := time.Now().Add(sessionTimeout + 5*time.Second)
	for len(c.bodies()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the silent node's message was not returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
	d := c.deliveries()[0]
	if string(d.Message.Body) != "held" || !d.Redelivered || d.Message.Properties.Headers["x-delivery-count"] != int64(1) {
		t.Fatalf("returned as %q redelivered=%v headers %v", d.Message.Body, d.Redelivered, d.Message.Properties.Headers)
	}
}

// TestQuorumLeaderConsumerFollowsNewLeader: a consumer on the leader is
// not cancelled when its node stops leading the queue (cut off, then
// back): it consumes through the new leader.
func TestQuorumLeaderConsumerFollowsNewLeader(t *testing.T) {
	net := raft.NewMemNetwork()
	envs := newQuorumEnvs(t, 3, net)
	l, _, _ := quorumRoles(t, envs, "q", 3)
	old := envs[l]
	c := newConsumer(-1)
	old.consume("q", c, false)
	waitDurable(t, old.publish(persistent("", "q", "before")))
	eventually(t, "delivered on the leader", func() bool { return len(c.bodies()) == 1 })
	old.v.Ack("q", c.deliveries()[0].Tag)

	cut := func(on bool) {
		for i := range envs {
			if i != l {
				net.Cut(uint64(l+1), uint64(i+1), on)
				net.Cut(uint64(i+1), uint64(l+1), on)
			}
		}
	}
	cut(true)
	others := append(append([]*env{}, envs[:l]...), envs[l+1:]...)
	now := others[servingNode(t, others, "q")]
	cut(false)
	eventually(t, "the old leader no longer serves", func() bool { return old.queueNamed("q").elsewhere() })
	waitDurable(t, now.publish(persistent("", "q", "after")))
	// ("before" may come again: its ack may not have been committed
	// before the cut.)
	eventually(t, "delivered through the new leader", func() bool { return slices.Contains(c.bodies(), "after") })
	if n := c.cancelled.Load(); n != 0 {
		t.Fatalf("the consumer was cancelled %d times", n)
	}
}

// TestQuorumConsumerTimeoutAnywhere: a delivery left unacknowledged past
// the queue's consumer timeout by a consumer on a node that does not
// lead is reported to it under its own tag (its channel then closes with
// 406, as on the leader).
func TestQuorumConsumerTimeoutAnywhere(t *testing.T) {
	envs := newQuorumEnvs(t, 3, raft.NewMemNetwork())
	if _, err := envs[0].v.DeclareQueue(QueueDef{Name: "q", Durable: true, Args: amqpwire.Table{
		"x-queue-type": "quorum", "x-consumer-timeout": int64(200)}}, false); err != nil {
		t.Fatal(err)
	}
	l := servingNode(t, envs, "q")
	other := envs[(l+1)%3]
	waitDurable(t, other.publish(persistent("", "q", "slow")))
	c := &timeoutConsumer{testConsumer: newConsumer(-1)}
	other.consumeTimed("q", c)
	eventually(t, "delivered", func() bool { return len(c.bodies()) == 1 })
	eventually(t, "the consumer timeout reported", func() bool { tags, _ := c.told(); return len(tags) == 1 })
	if tags, timeout := c.told(); tags[0] != c.deliveries()[0].Tag || timeout != 200*time.Millisecond {
		t.Fatalf("timed out %v after %v; want the delivery's tag %d after 200ms", tags, timeout, c.deliveries()[0].Tag)
	}
}
