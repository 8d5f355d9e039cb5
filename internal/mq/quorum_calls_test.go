package mq

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/wharf-mq/wharf/internal/raft"
	"go.etcd.io/raft/v3/raftpb"
)

// TestQuorumHandsOutOnlyCommittedDeliveries: a leader cut off from its
// followers assigns a message to its own client's consumer (and logs the
// delivery) but does not hand it over until that delivery is committed,
// which needs the followers: a new leader would otherwise deliver it
// again as never delivered (redelivered false, no x-delivery-count).
func TestQuorumHandsOutOnlyCommittedDeliveries(t *testing.T) {
	net := raft.NewMemNetwork()
	envs := newQuorumEnvs(t, 3, net)
	l, _, _ := quorumRoles(t, envs, "q", 3)
	leader := envs[l]
	waitDurable(t, leader.publish(persistent("", "q", "m")))

	isolate(net, len(envs), l, true)
	c := newConsumer(-1)
	leader.consume("q", c, false)
	q := leader.queueNamed("q")
	eventually(t, "the message assigned to the consumer", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.unacked) == 1
	})
	if got := c.bodies(); len(got) != 0 {
		t.Fatalf("handed over while its delivery cannot commit: %q", got)
	}
	isolate(net, len(envs), l, false)
	eventually(t, "the message handed over once the followers are back", func() bool { return len(c.bodies()) == 1 })
}

// TestQuorumRepeatedPullAnsweredAgain: a pull repeated (its answer was
// lost on the way) gets the same deliveries again, rather than nothing
// while they stay counted against the session's limit; an older pull
// arriving late gets nothing.
func TestQuorumRepeatedPullAnsweredAgain(t *testing.T) {
	envs := newQuorumEnvs(t, 3, raft.NewMemNetwork())
	l, _, _ := quorumRoles(t, envs, "q", 3)
	m := envs[l].queueNamed("q").quorum.Load()
	waitDurable(t, envs[l].publish(persistent("", "q", "m")))
	ctx := context.Background()
	start := &remoteRequest{Op: opSettle, Queue: m.q.id, Session: 7, Create: true, Limit: 1, Spec: &remoteSpec{Tag: "c"}}
	if r := m.serve(ctx, start); r.Error != "" {
		t.Fatal(r.Error)
	}
	pull := func(n uint64) *remoteReply {
		return m.serve(ctx, &remoteRequest{Op: opPull, Queue: m.q.id, Session: 7, Pull: n, Limit: 1})
	}
	first := pull(1)
	if len(first.Deliveries) != 1 {
		t.Fatalf("first pull: %+v", first)
	}
	again := pull(1)
	if len(again.Deliveries) != 1 || again.Deliveries[0].Tag != first.Deliveries[0].Tag {
		t.Fatalf("the repeated pull got %+v, want the first one's delivery again", again)
	}
	if late := pull(0); len(late.Deliveries) != 0 {
		t.Fatalf("an older pull got %+v", late)
	}
}

// TestQuorumPullAnswersCommittedDeliveries: a pull answers with the
// deliveries whose deliver commands are committed, without waiting for
// those of deliveries made after them (here never committed: the leader
// is cut off from its followers), which stay in the session for a later
// pull (or for the next leader to return).
func TestQuorumPullAnswersCommittedDeliveries(t *testing.T) {
	net := raft.NewMemNetwork()
	envs := newQuorumEnvs(t, 3, net)
	l, _, _ := quorumRoles(t, envs, "q", 3)
	m := envs[l].queueNamed("q").quorum.Load()
	waitDurable(t, envs[l].publish(persistent("", "q", "first")))
	waitDurable(t, envs[l].publish(persistent("", "q", "second")))
	ctx := context.Background()
	settle := func(limit int, create bool) {
		req := &remoteRequest{Op: opSettle, Queue: m.q.id, Session: 7, Create: create, Limit: limit, Spec: &remoteSpec{Tag: "c"}}
		if r := m.serve(ctx, req); r.Error != "" || r.Gone {
			t.Fatalf("settle: %+v", r)
		}
	}
	settle(1, true) // "first" goes to the session
	m.q.mu.Lock()
	handout := m.store.HandoutLocked()
	m.q.mu.Unlock()
	if err := handout.Sync(); err != nil {
		t.Fatal(err)
	}
	isolate(net, len(envs), l, true)
	settle(2, false) // "second" goes to the session; its deliver command cannot commit
	r := m.serve(ctx, &remoteRequest{Op: opPull, Queue: m.q.id, Session: 7, Pull: 1, Limit: 2})
	if len(r.Deliveries) != 1 || string(r.Deliveries[0].Body) != "first" {
		t.Fatalf("pull: %+v, want the first message alone", r)
	}
}

// TestQuorumFailedGetWithoutAckReturnsMessage: a basic.get without ack
// whose delivery cannot be committed (every node is cut off from the
// others) fails, and its message stays in the queue rather than being
// settled unsent: once the leader is back in contact with its followers
// (which are still cut off from each other, so that it leads again and
// its log, commands of the failed get included, is the one committed),
// the message is there, redelivered.
func TestQuorumFailedGetWithoutAckReturnsMessage(t *testing.T) {
	net := raft.NewMemNetwork()
	envs := newQuorumEnvs(t, 3, net)
	l, _, _ := quorumRoles(t, envs, "q", 3)
	waitDurable(t, envs[l].publish(persistent("", "q", "m")))
	m := envs[l].queueNamed("q").quorum.Load()
	for a := range envs {
		isolate(net, len(envs), a, true)
	}
	if r := m.serve(context.Background(), &remoteRequest{Op: opGet, Queue: m.q.id, NoAck: true}); r.Error == "" {
		t.Fatalf("get without ack answered %+v while its delivery cannot commit", r)
	}
	isolate(net, len(envs), l, false)
	eventually(t, "the message got again", func() bool {
		d, ok, err := envs[l].v.Get("q", true, 1)
		if err != nil || !ok {
			return false
		}
		if string(d.Message.Body) != "m" || !d.Redelivered {
			t.Fatalf("got %q (redelivered %v), want m, redelivered", d.Message.Body, d.Redelivered)
		}
		return true
	})
}

// TestQuorumRepeatedForwardTakenOnce: a forwarded publish repeated with
// the same id (its answer was lost, or held up in a partition) is
// enqueued once.
func TestQuorumRepeatedForwardTakenOnce(t *testing.T) {
	envs := newQuorumEnvs(t, 3, raft.NewMemNetwork())
	l, _, _ := quorumRoles(t, envs, "q", 3)
	m := envs[l].queueNamed("q").quorum.Load()
	batch := newStoredMessage(persistent("", "q", "once"), nil, 1).encoded()
	req := &remoteRequest{Op: opPublish, Queue: m.q.id, Batches: batch, Forward: 42}
	for range 3 {
		if r := m.serve(context.Background(), req); r.Error != "" {
			t.Fatal(r.Error)
		}
	}
	if got := envs[l].drain("q"); len(got) != 1 || got[0] != "once" {
		t.Fatalf("the queue holds %q, want one %q", got, "once")
	}
}

// TestQuorumForwardRecalledByNewLeader: a forwarded publish taken by a
// leader that is then cut off (its answer lost with it) and repeated to
// the new leader is not enqueued twice: the forward is in the log.
func TestQuorumForwardRecalledByNewLeader(t *testing.T) {
	net := raft.NewMemNetwork()
	envs := newQuorumEnvs(t, 3, net)
	l, _, _ := quorumRoles(t, envs, "q", 3)
	req := &remoteRequest{Op: opPublish, Queue: envs[l].queueNamed("q").id,
		Batches: newStoredMessage(persistent("", "q", "once"), nil, 1).encoded(), Forward: 42}
	if r := envs[l].queueNamed("q").quorum.Load().serve(context.Background(), req); r.Error != "" {
		t.Fatal(r.Error)
	}
	isolate(net, len(envs), l, true)
	others := append(append([]*env{}, envs[:l]...), envs[l+1:]...)
	n := others[servingNode(t, others, "q")]
	if r := n.queueNamed("q").quorum.Load().serve(context.Background(), req); r.Error != "" {
		t.Fatal(r.Error)
	}
	if got := n.drain("q"); len(got) != 1 || got[0] != "once" {
		t.Fatalf("the new leader's queue holds %q, want one %q", got, "once")
	}
}

// TestQuorumForwardRecalledAfterTruncation: a forwarded publish taken,
// consumed and acked, then repeated to a new leader (the first answer
// lost with the old one), is not enqueued again: the log is not cut
// below a forward's messages while a repeat of it may come.
func TestQuorumForwardRecalledAfterTruncation(t *testing.T) {
	net := raft.NewMemNetwork()
	envs := newQuorumEnvs(t, 3, net)
	l, _, _ := quorumRoles(t, envs, "q", 3)
	waitDurable(t, envs[l].publish(persistent("", "q", "before")))
	req := &remoteRequest{Op: opPublish, Queue: envs[l].queueNamed("q").id,
		Batches: newStoredMessage(persistent("", "q", "once"), nil, 1).encoded(), Forward: 42}
	if r := envs[l].queueNamed("q").quorum.Load().serve(context.Background(), req); r.Error != "" {
		t.Fatal(r.Error)
	}
	if got := envs[l].drain("q"); len(got) != 2 {
		t.Fatalf("the queue holds %q, want before and once", got)
	}
	for i, e := range envs { // the acks' truncate is committed everywhere
		s := e.queueNamed("q").quorum.Load().store
		eventually(t, fmt.Sprintf("node %d's log cut", i+1), func() bool { return s.LogStart() > 0 })
	}
	isolate(net, len(envs), l, true)
	others := append(append([]*env{}, envs[:l]...), envs[l+1:]...)
	n := others[servingNode(t, others, "q")]
	if r := n.queueNamed("q").quorum.Load().serve(context.Background(), req); r.Error != "" {
		t.Fatal(r.Error)
	}
	if got := n.drain("q"); len(got) != 0 {
		t.Fatalf("the new leader's queue holds %q, want nothing: once was acked", got)
	}
}

// isolate cuts node index l off from the other nodes, or heals the cut.
func isolate(net *raft.MemNetwork, nodes, l int, cut bool) {
	for i := range nodes {
		if i != l {
			net.Cut(uint64(l+1), uint64(i+1), cut)
			net.Cut(uint64(i+1), uint64(l+1), cut)
		}
	}
}

// TestQuorumForwardSplitAcrossFailover: a forward whose first message
// is committed while the rest of it never leaves the leader (its first
// message fills a Raft entry of its own, and the leader is cut off right
// after it) is repeated to the new leader, which enqueues only what the
// log does not hold: one copy of each message, not two of the first.
func TestQuorumForwardSplitAcrossFailover(t *testing.T) {
	net := raft.NewMemNetwork()
	// big fills a batch by itself (maxBatchBytes): its entry is the
	// forward's first, whatever the store's flushes do.
	big := "big|" + strings.Repeat("x", 1<<20)
	cut := &cutAfterEntry{marker: []byte("big|"), passed: map[uint64]bool{}}
	envs := newQuorumEnvsWrapped(t, 3, net, cut.wrap)
	l, _, _ := quorumRoles(t, envs, "q", 3)
	var batches []byte
	for _, body := range []string{big, "small"} {
		batches = append(batches, newStoredMessage(persistent("", "q", body), nil, 1).encoded()...)
	}
	req := &remoteRequest{Op: opPublish, Queue: envs[l].queueNamed("q").id, Batches: batches, Forward: 42}
	cut.arm(uint64(l + 1))
	first := make(chan *remoteReply, 1)
	go func() { first <- envs[l].queueNamed("q").quorum.Load().serve(context.Background(), req) }()
	others := append(append([]*env{}, envs[:l]...), envs[l+1:]...)
	n := others[servingNode(t, others, "q")]
	if r := n.queueNamed("q").quorum.Load().serve(context.Background(), req); r.Error != "" {
		t.Fatal(r.Error)
	}
	var got []string
	for _, body := range n.drain("q") {
		got = append(got, body[:min(len(body), 5)])
	}
	if len(got) != 2 || got[0] != "big|x" || got[1] != "small" {
		t.Fatalf("the new leader's queue holds %q, want one big message and one small", got)
	}
	<-first // the cut-off leader's attempt fails once it steps down, or its confirm wait ends
}

// cutAfterEntry cuts a leader off from its followers once each of them
// got the Raft entry holding marker: what that leader sends them after
// it (the rest of that message, and every later one) is dropped.
type cutAfterEntry struct {
	marker []byte
	mu     sync.Mutex
	leader uint64          // 0 until armed
	passed map[uint64]bool // the followers that got the marker's entry
}

func (c *cutAfterEntry) arm(leader uint64) {
	c.mu.Lock()
	c.leader = leader
	c.mu.Unlock()
}

func (c *cutAfterEntry) wrap(node uint64, h raft.Handler) raft.Handler {
	return cutHandler{Handler: h, node: node, c: c}
}

type cutHandler struct {
	raft.Handler
	node uint64
	c    *cutAfterEntry
}

func (h cutHandler) Deliver(from uint64, envs []raft.Envelope) {
	c := h.c
	c.mu.Lock()
	if c.leader == 0 || from != c.leader {
		c.mu.Unlock()
		h.Handler.Deliver(from, envs)
		return
	}
	var kept []raft.Envelope
	for _, e := range envs {
		if c.passed[h.node] {
			break
		}
		if e.Kind == raft.KindRaft && e.Msg.GetType() == raftpb.MsgApp {
			for i, ent := range e.Msg.Entries {
				if bytes.Contains(ent.GetData(), c.marker) {
					e.Msg.Entries = e.Msg.Entries[:i+1] // the envelope is this node's copy
					c.passed[h.node] = true
					break
				}
			}
		}
		kept = append(kept, e)
	}
	c.mu.Unlock()
	if len(kept) > 0 {
		h.Handler.Deliver(from, kept)
	}
}
