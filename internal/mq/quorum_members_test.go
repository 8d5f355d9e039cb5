package mq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/raft"
)

// TestPlaceQuorum: the leader goes to the node leading the fewest
// queues, the other members to the nodes holding the fewest replicas.
func TestPlaceQuorum(t *testing.T) {
	nodes := []int32{1, 2, 3, 4}
	leads := map[int32]int{1: 2, 3: 1, 4: 1}
	holds := map[int32]int{1: 3, 2: 3, 3: 1, 4: 2}
	for range 20 { // ties are broken at random: none here
		if got := placeQuorum(nodes, 3, leads, holds); !slices.Equal(got, []int32{2, 3, 4}) {
			t.Fatalf("placed on %v, want [2 3 4]", got)
		}
	}
	if got := placeQuorum(nodes, 1, leads, holds); !slices.Equal(got, []int32{2}) {
		t.Fatalf("one member: %v, want [2]", got)
	}
}

// TestQuorumLeadersSpread: quorum queues declared on one node of three
// are led evenly by the three.
func TestQuorumLeadersSpread(t *testing.T) {
	envs := newQuorumEnvs(t, 3, raft.NewMemNetwork())
	const queues = 6
	for i := range queues {
		name := fmt.Sprintf("q%d", i)
		if _, err := envs[0].v.DeclareQueue(QueueDef{Name: name, Durable: true,
			Args: amqpwire.Table{"x-queue-type": "quorum"}}, false); err != nil {
			t.Fatal(err)
		}
		placedLeader(t, envs, name) // placed before the next is
	}
	led := make([]int, len(envs))
	for i := range queues {
		led[placedLeader(t, envs, fmt.Sprintf("q%d", i))]++
	}
	if !slices.Equal(led, []int{2, 2, 2}) {
		t.Fatalf("queues led per node: %v, want 2 each", led)
	}
}

// TestQuorumGrowShrink: a quorum queue of three nodes of four grows onto
// the fourth, whose new replica receives the log, then shrinks off its
// leader, which hands its leadership on first and deletes its replica;
// every confirmed message is still there, and every node shows the
// members at each step.
func TestQuorumGrowShrink(t *testing.T) {
	envs := newQuorumEnvs(t, 4, raft.NewMemNetwork())
	l, _, n := quorumRoles(t, envs, "q", 3)
	want := bodies("m", 20)
	for _, body := range want {
		waitDurable(t, envs[l].publish(persistent("", "q", body)))
	}
	membersEverywhere := func(what string, want []int32) {
		t.Helper()
		eventually(t, what, func() bool {
			for _, e := range envs {
				d, err := e.v.QueueDetail("q")
				if err != nil || d.Target != nil || !slices.Equal(slices.Sorted(slices.Values(d.Members)), want) {
					return false
				}
			}
			return true
		})
	}

	// A caller that stops waiting at once has the change pending; the
	// leader carries it out all the same.
	newcomer := int32(n + 1)
	stopped, stop := context.WithCancel(t.Context())
	stop()
	changes, err := envs[n].r.GrowQuorumQueues(stopped, newcomer, QuorumSelection{})
	if err != nil || len(changes) != 1 || !errors.Is(changes[0].Err, ErrChangePending) || !slices.Contains(changes[0].Target, newcomer) {
		t.Fatalf("grow: %+v, %v; want it pending", changes, err)
	}
	membersEverywhere("the queue grown onto every node", []int32{1, 2, 3, 4})
	joined := envs[n].queueNamed("q").quorum.Load()
	if joined == nil {
		t.Fatal("the grown node holds no replica")
	}
	eventually(t, "the new replica caught up", func() bool {
		return joined.store.HighWatermark() == envs[l].queueNamed("q").quorum.Load().store.HighWatermark()
	})
	if changes, _ := envs[0].r.GrowQuorumQueues(t.Context(), newcomer, QuorumSelection{}); len(changes) != 0 {
		t.Fatalf("growing again changed %+v", changes)
	}

	gone := int32(l + 1)
	dir := envs[l].queueNamed("q").store.Dir()
	changes, err = envs[n].r.ShrinkQuorumQueues(t.Context(), gone)
	if err != nil || len(changes) != 1 || changes[0].Err != nil || slices.Contains(changes[0].Target, gone) {
		t.Fatalf("shrink: %+v, %v", changes, err)
	}
	var rest []int32
	for i := range envs {
		if i != l {
			rest = append(rest, int32(i+1))
		}
	}
	membersEverywhere("the queue shrunk off its leader", rest)
	eventually(t, "the old leader's replica deleted", func() bool {
		_, err := os.Stat(dir)
		return envs[l].queueNamed("q").quorum.Load() == nil && os.IsNotExist(err)
	})
	others := slices.Delete(slices.Clone(envs), l, l+1)
	got := others[servingNode(t, others, "q")].drain("q")
	if !slices.Equal(got, want) {
		t.Fatalf("after grow and shrink the queue holds %q, want %q", got, want)
	}
}

// TestQuorumShrinkKeepsOneMember: shrink never takes a queue's last
// member; a node that is not the cluster's cannot be grown onto.
func TestQuorumShrinkKeepsOneMember(t *testing.T) {
	envs := newQuorumEnvs(t, 2, raft.NewMemNetwork())
	l, _, _ := quorumRoles(t, envs, "q", 1)
	changes, err := envs[0].r.ShrinkQuorumQueues(t.Context(), int32(l+1))
	if err != nil || len(changes) != 1 || changes[0].Err == nil {
		t.Fatalf("shrinking the only member: %+v, %v; want the queue's error", changes, err)
	}
	if d, _ := envs[0].v.QueueDetail("q"); d.Target != nil || len(d.Members) != 1 {
		t.Fatalf("members %v, target %v after a refused shrink", d.Members, d.Target)
	}
	if _, err := envs[0].r.GrowQuorumQueues(t.Context(), 9, QuorumSelection{}); err == nil {
		t.Fatal("grew onto node 9, which is not in the cluster")
	}
}

// TestQuorumGrowOntoUnreachableUndone: a grow onto a node cut off from
// the others never completes (its replica cannot catch up); a shrink of
// that node replaces the change, and the queue is back on its members;
// the grow, still waiting, reports its change undone.
func TestQuorumGrowOntoUnreachableUndone(t *testing.T) {
	net := raft.NewMemNetwork()
	envs := newQuorumEnvs(t, 4, net)
	l, _, n := quorumRoles(t, envs, "q", 3)
	for _, body := range bodies("m", 100) { // more entries than a learner may lag and count as caught up
		waitDurable(t, envs[l].publish(persistent("", "q", body)))
	}
	d, _ := envs[l].v.QueueDetail("q")
	members := slices.Sorted(slices.Values(d.Members))
	for i := range envs {
		if i != n {
			net.Cut(uint64(i+1), uint64(n+1), true)
			net.Cut(uint64(n+1), uint64(i+1), true)
		}
	}
	grown := make(chan []MembershipChange, 1)
	go func() {
		changes, err := envs[l].r.GrowQuorumQueues(t.Context(), int32(n+1), QuorumSelection{})
		if err != nil {
			t.Errorf("grow: %v", err)
		}
		grown <- changes
	}()
	eventually(t, "the grow recorded", func() bool {
		d, _ := envs[l].v.QueueDetail("q")
		return d.Target != nil
	})
	changes, err := envs[l].r.ShrinkQuorumQueues(t.Context(), int32(n+1))
	if err != nil || len(changes) != 1 || changes[0].Err != nil || !slices.Equal(slices.Sorted(slices.Values(changes[0].Target)), members) {
		t.Fatalf("shrink during the grow: %+v, %v", changes, err)
	}
	eventually(t, "the queue back on its members everywhere", func() bool {
		for _, e := range envs {
			d, err := e.v.QueueDetail("q")
			if err != nil || d.Target != nil || !slices.Equal(slices.Sorted(slices.Values(d.Members)), members) {
				return false
			}
		}
		return envs[n].queueNamed("q").quorum.Load() == nil
	})
	if changes := <-grown; len(changes) != 1 || !errors.Is(changes[0].Err, errChangeUndone) {
		t.Fatalf("the grow the shrink undid: %+v; want it reported undone", changes)
	}
	others := slices.Delete(slices.Clone(envs), n, n+1)
	if got := others[servingNode(t, others, "q")].drain("q"); len(got) != 100 {
		t.Fatalf("the queue holds %d messages after the undone grow, want 100", len(got))
	}
}

// outsidersOf are the nodes that hold no replica of quorum queue name.
func outsidersOf(envs []*env, name string) []int32 {
	var out []int32
	for i, e := range envs {
		if e.queueNamed(name).quorum.Load() == nil {
			out = append(out, int32(i+1))
		}
	}
	return out
}

// membersEverywhere waits until every node shows quorum queue name with
// n members and no change in progress.
func membersEverywhere(t *testing.T, envs []*env, name string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d members of %s on every node", n, name), func() bool {
		for _, e := range envs {
			d, err := e.v.QueueDetail(name)
			if err != nil || d.Target != nil || len(d.Members) != n {
				return false
			}
		}
		return true
	})
}

// heldWrite is a write of a queue's record held back, as a slow metadata
// log would (clusterDefs.delay): held is closed once it is, through once
// it was applied or ignored after release.
type heldWrite struct {
	held, through chan struct{}
	release       func()
}

// holdRecordWrite holds back the first write of queue name's record that
// match picks, until release (at the test's end at the latest).
func holdRecordWrite(t *testing.T, envs []*env, name string, match func(queueRecord) bool) *heldWrite {
	defs := envs[0].cfg.Definitions.(nodeDefs).c
	key := queueKey(DefaultVHost, name)
	picks := func(k string, value []byte) bool {
		var rec queueRecord
		return k == key && json.Unmarshal(value, &rec) == nil && match(rec)
	}
	release := make(chan struct{})
	w := &heldWrite{held: make(chan struct{}), through: make(chan struct{}), release: sync.OnceFunc(func() { close(release) })}
	t.Cleanup(w.release)
	var holding, passing sync.Once
	delay := func(k string, value []byte) {
		if picks(k, value) {
			holding.Do(func() {
				close(w.held)
				<-release
			})
		}
	}
	after := func(k string, value []byte) {
		if picks(k, value) {
			passing.Do(func() { close(w.through) })
		}
	}
	defs.delay.Store(&delay)
	defs.after.Store(&after)
	return w
}

// TestQuorumShrinkOff: a node's removal shrinks it off every quorum
// queue, and is refused, the queue named, while the node is a queue's
// only member; once that queue is gone it succeeds.
func TestQuorumShrinkOff(t *testing.T) {
	envs := newQuorumEnvs(t, 3, raft.NewMemNetwork())
	l, _, _ := quorumRoles(t, envs, "lonely", 1)
	node := int32(l + 1)
	if _, err := envs[0].v.DeclareQueue(QueueDef{Name: "q", Durable: true,
		Args: amqpwire.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": 3}}, false); err != nil {
		t.Fatal(err)
	}
	placedLeader(t, envs, "q")
	err := envs[0].r.ShrinkOff(t.Context(), node)
	if err == nil || !strings.Contains(err.Error(), `"lonely" in vhost "/"`) || !strings.Contains(err.Error(), "only member") {
		t.Fatalf("shrinking node %d, lonely's only member, off: %v", node, err)
	}
	if d, err := envs[0].v.QueueDetail("q"); err != nil || len(d.Members) != 2 || slices.Contains(d.Members, node) || d.Target != nil {
		t.Fatalf("q after the shrink off node %d: members %v, target %v, %v", node, d.Members, d.Target, err)
	}
	if _, err := envs[l].v.DeleteQueue("lonely", false, false, 1); err != nil {
		t.Fatal(err)
	}
	if err := envs[0].r.ShrinkOff(t.Context(), node); err != nil {
		t.Fatalf("shrinking node %d off again, lonely gone: %v", node, err)
	}
}

// TestQuorumDeletedNotBroughtBack: the leader's record of a grow done,
// held back until the queue was deleted on another node (and there
// declared again, a classic queue under a new id), is ignored as it
// lands: the queue stays deleted (or the new one), on every node.
func TestQuorumDeletedNotBroughtBack(t *testing.T) {
	for _, again := range []bool{false, true} {
		t.Run(map[bool]string{false: "deleted", true: "declared again"}[again], func(t *testing.T) {
			envs := newQuorumEnvs(t, 4, raft.NewMemNetwork())
			_, member, n := quorumRoles(t, envs, "q", 3)
			old := envs[member].queueNamed("q").id
			newcomer := int32(n + 1)
			w := holdRecordWrite(t, envs, "q", func(rec queueRecord) bool {
				return rec.Target == nil && slices.Contains(rec.Members, newcomer)
			})

			stopped, stop := context.WithCancel(t.Context())
			stop() // the grow is written, and carried on by the leader
			if changes, err := envs[n].r.GrowQuorumQueues(stopped, newcomer, QuorumSelection{}); err != nil || len(changes) != 1 {
				t.Fatalf("grow: %+v, %v", changes, err)
			}
			<-w.held
			if _, err := envs[member].v.DeleteQueue("q", false, false, 0); err != nil {
				t.Fatal(err)
			}
			if again {
				envs[member].declareQueue("q", true)
			}
			w.release()
			<-w.through

			value, live := envs[0].cfg.Cluster.Get(queueKey(DefaultVHost, "q"))
			var rec queueRecord
			if live != again || live && (json.Unmarshal(value, &rec) != nil || rec.ID == old || rec.Members != nil) {
				t.Fatalf("the queue's record is %s (live %v), want the deleted queue's gone", value, live)
			}
			// Every node follows the definitions in their order: once the
			// next one is everywhere, so is the queue's deletion.
			envs[0].declareExchange("after", "direct", true, nil)
			for i, e := range envs {
				eventually(t, fmt.Sprintf("node %d followed", i+1), func() bool { return e.v.exchange("after") != nil })
				if q := e.v.queue("q"); q != nil && (!again || q.id == old || q.membership.Load() != nil) {
					t.Fatalf("node %d lists the deleted queue", i+1)
				}
			}
		})
	}
}

// TestQuorumStaleDoneIgnored: the leader's record of a grow done, held
// back until a second grow was written whose caller stopped waiting (no
// one would write it again), is ignored as it lands, and the second grow
// is applied too.
func TestQuorumStaleDoneIgnored(t *testing.T) {
	envs := newQuorumEnvs(t, 5, raft.NewMemNetwork())
	quorumRoles(t, envs, "q", 3)
	outsiders := outsidersOf(envs, "q")
	first, second := outsiders[0], outsiders[1]
	w := holdRecordWrite(t, envs, "q", func(rec queueRecord) bool {
		return rec.Target == nil && slices.Contains(rec.Members, first)
	})

	stopped, stop := context.WithCancel(t.Context())
	stop() // neither caller waits: the leader carries the changes on
	if changes, err := envs[0].r.GrowQuorumQueues(stopped, first, QuorumSelection{}); err != nil || len(changes) != 1 {
		t.Fatalf("grow onto %d: %+v, %v", first, changes, err)
	}
	<-w.held
	if changes, err := envs[1].r.GrowQuorumQueues(stopped, second, QuorumSelection{}); err != nil || len(changes) != 1 {
		t.Fatalf("grow onto %d: %+v, %v", second, changes, err)
	}
	w.release()
	membersEverywhere(t, envs, "q", 5)
}
