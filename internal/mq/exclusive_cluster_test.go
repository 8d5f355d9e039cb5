package mq

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// recordedKeys returns the keys of e's definition store that start with
// prefix.
func (e *env) recordedKeys(prefix string) []string {
	e.t.Helper()
	var keys []string
	err := e.r.defs.Load(func(key string, _ []byte) error {
		if strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return keys
}

// declareExclusive declares an exclusive queue of connection conn, bound
// to the fanout exchange "news".
func (e *env) declareExclusive(name string, conn ConnID) {
	e.t.Helper()
	if _, err := e.v.DeclareQueue(QueueDef{Name: name, Exclusive: true, AutoDelete: true, Owner: conn}, false); err != nil {
		e.t.Fatal(err)
	}
	if err := e.v.BindQueue(name, "news", "", nil, conn); err != nil {
		e.t.Fatal(err)
	}
}

// TestExclusiveQueueUsedFromAnotherNode: node 1's exclusive queue, bound
// to a durable fanout exchange, takes what node 2 publishes to the
// exchange and to the default exchange with its name, confirmed once
// node 1 enqueued it; on node 2 it is 405 for every use; when its
// connection closes, its record and its binding's are gone and node 2
// routes nothing to it.
func TestExclusiveQueueUsedFromAnotherNode(t *testing.T) {
	envs, _ := newClassicEnvs(t, 2)
	home, other := envs[0], envs[1]
	home.declareExchange("news", "fanout", true, nil)
	home.declareExclusive("sub", 7)
	if keys := home.recordedKeys(bindingKeyPrefix + "%2F/news/"); len(keys) != 1 {
		t.Fatalf("binding records %q, want the exclusive queue's", keys)
	}
	other.waitBound("sub")

	waitDurable(t, other.publish(msg("news", "", "fanned")))
	waitDurable(t, other.publish(persistent("", "sub", "direct")))
	if got := home.drainAs("sub", 7); len(got) != 2 || got[0] != "fanned" || got[1] != "direct" {
		t.Fatalf("node 1's exclusive queue holds %q", got)
	}

	_, err := other.v.DeclareQueue(QueueDef{Name: "sub"}, true)
	wantCode(t, err, amqpwire.CodeResourceLocked, "")
	_, err = other.v.DeclareQueue(QueueDef{Name: "sub", Exclusive: true, AutoDelete: true, Owner: 7}, false)
	wantCode(t, err, amqpwire.CodeResourceLocked, "")
	_, err = other.v.Consume("sub", ConsumeSpec{Consumer: newConsumer(1), Conn: 7})
	wantCode(t, err, amqpwire.CodeResourceLocked, "")
	_, _, err = other.v.Get("sub", true, 7)
	wantCode(t, err, amqpwire.CodeResourceLocked, "")
	_, err = other.v.PurgeQueue("sub", 7)
	wantCode(t, err, amqpwire.CodeResourceLocked, "")
	_, err = other.v.DeleteQueue("sub", false, false, 7)
	wantCode(t, err, amqpwire.CodeResourceLocked, "")
	wantCode(t, other.v.BindQueue("sub", "amq.direct", "k", nil, 7), amqpwire.CodeResourceLocked, "")

	home.v.ConnectionClosed(7)
	if keys := home.recordedKeys(queueKeyPrefix); len(keys) != 0 {
		t.Fatalf("queue records %q left after the owner closed", keys)
	}
	if keys := home.recordedKeys(bindingKeyPrefix); len(keys) != 0 {
		t.Fatalf("binding records %q left after the owner closed", keys)
	}
	eventually(t, "node 2's placeholder gone", func() bool { return other.v.queue("sub") == nil })
	if res := other.publish(msg("news", "", "late")); res.Routed != 0 {
		t.Fatalf("publish to the exchange after the queue's owner closed: routed to %d", res.Routed)
	}
}

// TestExclusiveQueueRecordsDroppedAtRestart: a node's exclusive queues
// do not outlive it: once restarted (and caught up) it deletes their
// records and their bindings', and the other nodes follow; one declared
// since is kept. A transient queue that is not exclusive is not
// recorded: each node may have its own of a name.
func TestExclusiveQueueRecordsDroppedAtRestart(t *testing.T) {
	envs, _ := newClassicEnvs(t, 2)
	home, other := envs[0], envs[1]
	home.declareExchange("news", "fanout", true, nil)
	home.declareExclusive("sub", 7)
	home.declareQueue("scratch", false)
	other.declareQueue("scratch", false)
	other.waitBound("sub")
	if keys := home.recordedKeys(queueKeyPrefix); len(keys) != 1 {
		t.Fatalf("queue records %q, want the exclusive queue's alone", keys)
	}

	home.restart()
	home.waitDropped("sub", other)
	if home.v.queue("sub") != nil {
		t.Fatal("node 1 kept an exclusive queue from before its restart")
	}
	home.redeclareNews("sub", 8, other) // the name again, since the restart
}

// waitDropped waits until the definitions, as e reads them, hold no
// queue or binding record, and none of others holds the queue name.
func (e *env) waitDropped(name string, others ...*env) {
	e.t.Helper()
	eventually(e.t, "the records dropped", func() bool {
		return len(e.recordedKeys(queueKeyPrefix)) == 0 && len(e.recordedKeys(bindingKeyPrefix)) == 0
	})
	for _, o := range others {
		eventually(e.t, fmt.Sprintf("node %d's placeholder gone", o.r.nodeID()), func() bool { return o.v.queue(name) == nil })
	}
}

// redeclareNews declares the exclusive queue name on e again, for
// connection conn, and checks that it takes what publisher publishes to
// "news".
func (e *env) redeclareNews(name string, conn ConnID, publisher *env) {
	e.t.Helper()
	e.declareExclusive(name, conn)
	publisher.waitBound(name)
	waitDurable(e.t, publisher.publish(msg("news", "", "again")))
	if got := e.drainAs(name, conn); len(got) != 1 {
		e.t.Fatalf("the exclusive queue %s declared again on node %d holds %q", name, e.r.nodeID(), got)
	}
}

// TestForwardToDeletedExclusiveQueueConfirmed: a message node 2 forwards
// to node 1's exclusive queue, deleted there before it arrives (its
// connection closed, node 2 not told yet), is confirmed, as RabbitMQ
// confirms a message whose queue was deleted: a publisher to a fanout
// exchange is not nacked because a subscriber left.
func TestForwardToDeletedExclusiveQueueConfirmed(t *testing.T) {
	envs, _ := newClassicEnvs(t, 2)
	home, other := envs[0], envs[1]
	home.declareExchange("news", "fanout", true, nil)
	home.declareExclusive("sub", 7)
	other.waitBound("sub")
	home.r.awaitCaughtUp() // its own records from now on stand for queues of this start
	q := home.v.queue("sub")
	// Deleted on node 1 alone, as if node 2 had not followed the delete
	// yet.
	home.v.defMu.Lock()
	home.v.mu.Lock()
	delete(home.v.queues, "sub")
	home.v.mu.Unlock()
	home.v.defMu.Unlock()
	// Node 1's own follower may apply the queue's record only now (on a
	// loaded machine it lags): that brings no deleted queue back.
	home.r.followDefinition(queueKey(home.v.name, "sub"))
	res := other.publish(msg("news", "", "late"))
	if res.Routed != 1 {
		t.Fatalf("routed to %d queues, want node 1's placeholder", res.Routed)
	}
	waitDurable(t, res) // fails if nacked
	home.v.mu.Lock()
	home.v.queues["sub"] = q // so that the test ends as it began
	home.v.mu.Unlock()
}

// TestExclusiveRecordFollowedAfterItsDelete: a node that applies a stale
// record of one of its exclusive queues, read before the queue was
// deleted, does not build the queue again: a deleted queue under its
// name would refuse what other nodes forward to it (nacked, where
// RabbitMQ confirms) until the delete is followed. (The follower reads a
// record under defMu, so it no longer applies such a record itself:
// TestFollowerReadsUnderDefMu.)
func TestExclusiveRecordFollowedAfterItsDelete(t *testing.T) {
	envs, _ := newClassicEnvs(t, 2)
	home := envs[0]
	home.r.awaitCaughtUp()
	home.declareExchange("news", "fanout", true, nil)
	home.declareExclusive("sub", 7)
	key := queueKey(home.v.name, "sub")
	record, live := home.r.cfg.Cluster.Get(key)
	if !live {
		t.Fatal("the exclusive queue is not recorded")
	}
	home.v.ConnectionClosed(7)
	cleanup := deletions{followed: true}
	home.v.defMu.Lock()
	err := home.v.followQueueLocked(key, record, true, &cleanup)
	home.v.defMu.Unlock()
	cleanup.run(home.r)
	if err != nil {
		t.Fatal(err)
	}
	if q := home.v.queue("sub"); q != nil {
		t.Fatalf("the deleted exclusive queue %s is back", q.id)
	}
}

// TestExclusivePlaceholderDeletedAlone: deleting the placeholder of
// another node's exclusive queue (as a node does that follows its delete
// late, the name declared again since) leaves the records under its
// name alone: they are the home node's to delete.
func TestExclusivePlaceholderDeletedAlone(t *testing.T) {
	envs, _ := newClassicEnvs(t, 2)
	home, other := envs[0], envs[1]
	home.declareExchange("news", "fanout", true, nil)
	home.declareExclusive("sub", 7)
	other.waitBound("sub")
	v := other.v
	v.defMu.Lock()
	var cleanup deletions
	err := v.deleteQueueLocked(v.queues["sub"], &cleanup)
	v.defMu.Unlock()
	cleanup.run(other.r)
	if err != nil {
		t.Fatal(err)
	}
	if len(home.recordedKeys(queueKeyPrefix)) != 1 || len(home.recordedKeys(bindingKeyPrefix)) != 1 {
		t.Fatalf("records left: %q %q, want the exclusive queue's and its binding's",
			home.recordedKeys(queueKeyPrefix), home.recordedKeys(bindingKeyPrefix))
	}
}

// waitBound waits until e follows another node's queue and a binding to
// it.
func (e *env) waitBound(queue string) {
	e.t.Helper()
	eventually(e.t, fmt.Sprintf("node %d follows the queue %s and its binding", e.r.nodeID(), queue), func() bool {
		e.v.mu.RLock()
		defer e.v.mu.RUnlock()
		q := e.v.queues[queue]
		return q != nil && len(q.sources) > 0
	})
}

// drainAs is drain for connection conn.
func (e *env) drainAs(queue string, conn ConnID) []string {
	e.t.Helper()
	var out []string
	for {
		d, ok, err := e.v.Get(queue, true, conn)
		if err != nil {
			e.t.Fatalf("Get(%s): %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, string(d.Message.Body))
	}
}

// TestExclusiveRecordsOfRemovedNode: node 1, with an exclusive queue
// bound to a durable exchange, goes down and is removed for good. The
// node that carries out the removal (node 2, its removal hook) drops the
// queue's record and its binding's once the removal applied; node 3
// follows, and a client there declares the name again (no 405) and gets
// what node 2 publishes to the exchange.
func TestExclusiveRecordsOfRemovedNode(t *testing.T) {
	envs, calls := newClassicEnvs(t, 3)
	removed, remover, other := envs[0], envs[1], envs[2]
	removed.declareExchange("news", "fanout", true, nil)
	removed.declareExclusive("sub", 7)
	other.waitBound("sub")
	calls.setDown(1, true)

	if err := remover.r.PrepareRemoval(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if keys := remover.recordedKeys(queueKeyPrefix); len(keys) != 1 {
		t.Fatalf("queue records %q before node 1's removal applied, want its exclusive queue's", keys)
	}
	calls.remove(1) // the removal applies
	remover.waitDropped("sub", remover, other)
	other.redeclareNews("sub", 9, remover)
}

// TestExclusiveRecordsOfNodeRemovingItself: node 1 carries out its own
// removal (a Kafka client's UnregisterBroker may reach the node itself);
// it cannot write once removed, so it hands the drop of its exclusive
// queue's records over to node 2, which drops them once the removal
// applied: node 3 may declare the name again.
func TestExclusiveRecordsOfNodeRemovingItself(t *testing.T) {
	envs, calls := newClassicEnvs(t, 3)
	removed, other := envs[0], envs[2]
	removed.declareExchange("news", "fanout", true, nil)
	removed.declareExclusive("sub", 7)
	other.waitBound("sub")

	if err := removed.r.PrepareRemoval(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if n := len(calls.ops(opAwaitRemoval)); n != 1 {
		t.Fatalf("node 1 asked %d nodes to drop its exclusive queues once removed, want 1", n)
	}
	calls.remove(1) // the removal applies
	other.waitDropped("sub", envs[1], other)
	other.redeclareNews("sub", 9, envs[1])
}
