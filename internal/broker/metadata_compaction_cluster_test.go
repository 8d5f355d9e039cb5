package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// clusterMetadata is what a node's applied metadata holds, printed (fmt
// sorts map keys): the state a replay of its log must give back. leaders
// apart, as a restart moves partition leaderships.
type clusterMetadata struct {
	rest, leaders string
}

func dumpMetadata(st metadataState) clusterMetadata {
	return clusterMetadata{
		rest: fmt.Sprintf("cluster %s\ntopics %v\ndefinitions %q\nproducer ids to %d, blocks %v\nbrokers %v\nnodes %v\nreassignments %v",
			st.clusterID, st.topics, st.definitions, st.producerIDBlockEnd, st.producerBlocks, st.brokers, st.nodes, st.reassignments),
		leaders: fmt.Sprint(st.leaders),
	}
}

// appliedMetadata is node b's applied metadata, once it applied
// everything committed before the call.
func appliedMetadata(t *testing.T, b *Broker) clusterMetadata {
	t.Helper()
	if err := b.Definitions().Barrier(); err != nil {
		t.Fatal(err)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return dumpMetadata(b.state)
}

// metadataChurn writes, through nodes 1 and 2 of c, what a cluster's
// metadata log compacts wrong if it keeps the newest record of each key:
// topics created and deleted, two nodes creating one topic or one
// definition (PutIf on nothing) at once, a compare-and-set chain of
// PutIf with stale ones among them, producer id blocks asked for at once,
// and partition leaderships moved back and forth.
func metadataChurn(t *testing.T, c *testCluster, round string, n int) {
	t.Helper()
	b1, b2 := c.broker(1), c.broker(2)
	for i := range n {
		name := fmt.Sprintf("%s-churn-%d", round, i)
		if _, err := b1.CreateTopic(TopicSpec{Name: name, ReplicationFactor: 1}, false); err != nil {
			t.Fatal(err)
		}
		if err := b1.DeleteTopic(name); err != nil {
			t.Fatal(err)
		}
		if err := b2.Definitions().Put("queue/"+name, []byte(`{"durable":true}`)); err != nil {
			t.Fatal(err)
		}
		if err := b1.Definitions().Delete("queue/" + name); err != nil {
			t.Fatal(err)
		}
	}
	// Two creators at once: the first applied wins, the other record is
	// the newest of its key half the time.
	both := func(fn func(b *Broker, from int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, b := range []*Broker{b1, b2} {
			wg.Go(func() { errs[i] = fn(b, i+1) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		name := fmt.Sprintf("%s-raced-%d", round, i)
		both(func(b *Broker, _ int) error {
			if _, err := b.CreateTopic(TopicSpec{Name: name, ReplicationFactor: 1}, false); err != nil && !errors.Is(err, ErrTopicExists) {
				return err
			}
			return nil
		})
		both(func(b *Broker, from int) error {
			return b.Definitions().PutIf(fmt.Sprintf("queue/%s-raced-%d", round, i), []byte("from "+strconv.Itoa(from)), nil)
		})
	}
	// A membership compare-and-set chain: each node writes the next value
	// on the one it read, so one of each pair is stale and ignored.
	key := "quorum/" + round
	if err := b1.Definitions().Put(key, []byte("0")); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		both(func(b *Broker, from int) error {
			cur, _ := b.Definitions().Get(key)
			return b.Definitions().PutIf(key, fmt.Appendf(nil, "%s+%d", cur, from), cur)
		})
	}
	// Producer id blocks asked for at once: one is refused and asks again.
	for range 3 {
		both(func(b *Broker, _ int) error {
			b.producerIDMu.Lock()
			defer b.producerIDMu.Unlock()
			return b.reserveClusterProducerIDs()
		})
	}
	// Leaderships moved: each move is a leader record of a higher epoch.
	led, err := b1.Topic("led")
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []int32{2, 1, 2, 1} {
		p, err := led.Partition(0)
		if err != nil {
			t.Fatal(err)
		}
		c.waitFor(fmt.Sprintf("led-0 led by %d", to), func() bool {
			if leader, _ := b1.reportedLeader(led, 0); leader == to {
				return true
			}
			p.raft.Group().TransferLeadership(uint64(to))
			return false
		})
	}
}

// compactNode runs a pass of node b's cleaner over its metadata log past
// delete.retention.ms, so that the tombstones go too, checks that its log
// replays to the state it applied (again until no leader report lands
// between the two), and returns what the pass did.
func compactNode(t *testing.T, b *Broker) replica.CompactStats {
	t.Helper()
	st, err := b.compactClusterMetadata(context.Background(), time.Now().Add(25*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		replayed, err := b.meta.load()
		if err != nil {
			t.Fatal(err)
		}
		got, want := dumpMetadata(replayed), appliedMetadata(t, b)
		if got == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: its compacted metadata log replays to\n%v\nwant\n%v", b.cfg.NodeID, got, want)
		}
	}
}

// TestMetadataLogCompactsCluster: a cluster's metadata log, compacted on
// every node, replays to the state the nodes applied from the whole log,
// and a node that was away catches up from the compacted log by a
// snapshot, which it replays whole. Node 3 is away twice: cut off while
// running (its apply loop replays the installed log) and stopped (its
// start replays it), each time while keys it holds are deleted and their
// tombstones compacted away. Node restarts replay the same state.
func TestMetadataLogCompactsCluster(t *testing.T) {
	c := newTestClusterWith(t, 3, func(cfg *Config) { cfg.MetadataLogSegmentBytes = 16 << 10 })
	b1 := c.broker(1)
	if _, err := b1.CreateTopic(TopicSpec{Name: "led", ReplicationFactor: 3}, false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kept", "gone-while-cut", "gone-while-down"} {
		if _, err := b1.CreateTopic(TopicSpec{Name: name, Partitions: 2, Configs: map[string]string{"retention.ms": "60000"}}, false); err != nil {
			t.Fatal(err)
		}
		if err := b1.Definitions().Put("queue/"+name, []byte(`{"durable":true}`)); err != nil {
			t.Fatal(err)
		}
	}
	if got := appliedMetadata(t, c.broker(3)); got.rest != appliedMetadata(t, b1).rest {
		t.Fatal("node 3 did not apply the first topics")
	}
	dir := func(id int32) string { return filepath.Join(c.base, "node"+strconv.Itoa(int(id))) }
	away := func(what string) {
		t.Helper()
		for _, name := range []string{"gone-while-" + what} {
			if err := c.broker(2).DeleteTopic(name); err != nil {
				t.Fatal(err)
			}
			if err := c.broker(2).Definitions().Delete("queue/" + name); err != nil {
				t.Fatal(err)
			}
		}
		metadataChurn(t, c, what, 100)
		before := metadataLogBytes(t, dir(1))
		st := compactNode(t, c.broker(1))
		compactNode(t, c.broker(2))
		after := metadataLogBytes(t, dir(1))
		// What a pass may rewrite ends where the active segment and the
		// entries Raft still serves begin, which fall differently from run
		// to run: what it rewrote must have shrunk to a quarter at most.
		t.Logf("node 3 %s: node 1's metadata log %d bytes before compaction, %d after; the pass rewrote %d bytes into %d",
			what, before, after, st.BytesRead, st.BytesWritten)
		if !st.Cleaned || st.BytesWritten*4 > st.BytesRead {
			t.Fatalf("node 1's compaction pass rewrote %d bytes into %d: it should have kept a quarter at most", st.BytesRead, st.BytesWritten)
		}
	}
	// sameAs waits until node id applied what node 1 did.
	sameAs1 := func(id int32) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; {
			want, got := appliedMetadata(t, b1), appliedMetadata(t, c.broker(id))
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d applied\n%v\nnode 1\n%v", id, got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	c.isolate(3, true)
	c.waitFor("a metadata leader on node 1 or 2", func() bool {
		for _, id := range []int32{1, 2} {
			if _, _, leading := c.broker(id).meta.raft.Leadership(); leading {
				return true
			}
		}
		return false
	})
	away("cut")
	c.isolate(3, false)
	sameAs1(3)
	if c.broker(3).meta.raft.Installs() == 0 {
		t.Fatal("node 3 caught up without a snapshot")
	}

	c.stop(3)
	away("down")
	if _, err := c.restart(3); err != nil {
		t.Fatal(err)
	}
	sameAs1(3)
	if c.broker(3).meta.raft.Installs() == 0 {
		t.Fatal("node 3 caught up without a snapshot")
	}
	compactNode(t, c.broker(3))

	// Restarted one at a time, each node replays its compacted log to
	// what the others applied.
	want := appliedMetadata(t, b1)
	for _, id := range c.ids {
		c.stop(id)
		if _, err := c.restart(id); err != nil {
			t.Fatal(err)
		}
		if got := appliedMetadata(t, c.broker(id)); got.rest != want.rest {
			t.Fatalf("node %d after a restart:\n%v\nwant\n%v", id, got.rest, want.rest)
		}
	}
	b1 = c.broker(1)
	for _, id := range c.ids[1:] {
		sameAs1(id)
	}
	for _, name := range []string{"gone-while-cut", "gone-while-down", "cut-churn-0", "down-churn-99"} {
		if _, err := b1.Topic(name); err == nil {
			t.Errorf("deleted topic %s is back", name)
		}
		if _, ok := b1.Definitions().Get("queue/" + name); ok {
			t.Errorf("deleted definition queue/%s is back", name)
		}
	}
	if _, err := b1.Topic("kept"); err != nil {
		t.Errorf("topic kept: %v", err)
	}
}

// passBetweenReads is a cluster's metadata log whose reads return one
// batch at a time and which, before the first read from at on, runs a
// compaction pass past delete.retention.ms: the interleaving of a replay
// with a pass that drops a record the replay read and its tombstone.
type passBetweenReads struct {
	*replica.RaftLog
	at     int64
	pass   func()
	passed bool
}

func (l *passBetweenReads) Read(offset, _ int64) (*replica.Slice, error) {
	if offset >= l.at && !l.passed {
		l.passed = true
		l.pass()
	}
	return l.RaftLog.Read(offset, 1)
}

// TestMetadataReplayIsOneVersion: a replay of a cluster's metadata log
// (rebuildState's, after a snapshot install) that a pass rewrites under
// it, the pass dropping a deleted topic's record, already read, and the
// tombstone, not yet read, replays again and does not bring the topic
// back.
func TestMetadataReplayIsOneVersion(t *testing.T) {
	c := newTestClusterWith(t, 1, func(cfg *Config) { cfg.MetadataLogSegmentBytes = 16 << 10 })
	b := c.broker(1)
	if _, err := b.CreateTopic(TopicSpec{Name: "gone", ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	b.mu.RLock()
	created := b.appliedEnd
	b.mu.RUnlock()
	if err := b.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("x"), 1<<10)
	for i := range 40 { // closes the tombstone's segment
		if err := b.Definitions().Put(fmt.Sprintf("queue/q%d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Definitions().Barrier(); err != nil {
		t.Fatal(err)
	}

	log := &passBetweenReads{RaftLog: b.meta.raft, at: created, pass: func() {
		st, err := b.compactClusterMetadata(context.Background(), time.Now().Add(25*time.Hour))
		if err != nil || !st.Cleaned {
			t.Errorf("the pass during the replay: %+v, %v", st, err)
		}
	}}
	m := &metadataLog{log: log, raft: b.meta.raft}
	st, err := m.loadOneVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !log.passed {
		t.Fatalf("the replay read nothing from offset %d on", created)
	}
	if rec, ok := st.topics["gone"]; ok {
		t.Fatalf("the replay brings the deleted topic back: %+v", rec)
	}
}
