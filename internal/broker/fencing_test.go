package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
)

// registerAll registers every running node and waits until each lists
// them all.
func (c *testCluster) registerAll() {
	c.t.Helper()
	for id, nd := range c.nodes {
		nd.b.Register(fmt.Sprint("host", id), 9092)
	}
	for id, nd := range c.nodes {
		c.waitFor(fmt.Sprintf("node %d to list every broker", id), func() bool { return len(nd.b.Brokers()) == len(c.nodes) })
	}
}

// removeWhileAway removes node away, which the metadata group's leader
// among the other nodes does while away is cut off or down, and returns
// that leader.
func (c *testCluster) removeWhileAway(away int32) *Broker {
	c.t.Helper()
	var by *Broker
	c.waitFor("a metadata leader other than the node away", func() bool {
		for id, nd := range c.nodes {
			if _, _, leading := nd.b.meta.raft.Leadership(); id != away && leading {
				by = nd.b
				return true
			}
		}
		return false
	})
	if err := by.RemoveNode(away); err != nil {
		c.t.Fatalf("removing node %d: %v", away, err)
	}
	return by
}

// TestNodeRemovedWhileDownRefusesToStart: node 3 is removed while it is
// down. Started again, it never gets the removal record (the metadata
// group no longer sends it anything), but the others tell it: Open fails
// with the removal, and the marker makes the next start refuse at once.
// It is never listed again.
func TestNodeRemovedWhileDownRefusesToStart(t *testing.T) {
	c := newTestCluster(t, 3)
	c.registerAll()
	c.stop(3)
	by := c.removeWhileAway(3)

	b, err := c.restart(3)
	if b != nil {
		b.Close()
	}
	if !errors.Is(err, ErrNodeRemoved) {
		t.Fatalf("node 3, removed while down, started again: Open returned %v, want ErrNodeRemoved", err)
	}
	if _, err := os.Stat(filepath.Join(c.base, "node3", removedMarker)); err != nil {
		t.Fatalf("no removal marker after the refused start: %v", err)
	}
	for _, info := range by.Brokers() {
		if info.NodeID == 3 {
			t.Fatalf("node 3 listed after its removal: %+v", by.Brokers())
		}
	}
}

// TestNodeRemovedWhileCutOffFencesItself: node 3 is cut off from the
// others while they remove it. Once it can reach them again it still
// gets no record from the metadata group, which no longer counts it;
// asking the others, it learns of its removal and fences itself: Removed
// closes, its data directory records the removal, and its metadata
// writes fail with the removal.
func TestNodeRemovedWhileCutOffFencesItself(t *testing.T) {
	c := newTestCluster(t, 3)
	c.registerAll()
	removed := c.broker(3)
	c.isolate(3, true)
	c.removeWhileAway(3)
	if removed.RemovedErr() != nil {
		t.Fatal("node 3 applied its removal while cut off")
	}
	c.isolate(3, false)
	c.waitFor("node 3 to fence itself", func() bool { return removed.RemovedErr() != nil })
	if _, err := os.Stat(filepath.Join(c.base, "node3", removedMarker)); err != nil {
		t.Fatalf("no removal marker: %v", err)
	}
	// Its metadata writes fail at once, naming the removal, rather than
	// wait out their timeout on a group that no longer counts it.
	start := time.Now()
	if err := removed.meta.write(producerIDBlockKey, producerIDBlockRecord{Node: 3, Size: 1}); !errors.Is(err, ErrNodeRemoved) ||
		time.Since(start) >= clusterWriteTimeout {
		t.Fatalf("a metadata write of the fenced node: %v after %v, want ErrNodeRemoved at once", err, time.Since(start))
	}
}

// TestLeaderRefusesRemovedNodesWrites: the metadata leader refuses a
// registration of a removed node forwarded to it, saying why, rather
// than commit a record every node ignores; a live node's is taken.
func TestLeaderRefusesRemovedNodesWrites(t *testing.T) {
	c := newTestCluster(t, 3)
	c.registerAll()
	c.stop(3)
	leader := c.removeWhileAway(3).cfg.NodeID
	follower := c.broker(1)
	if leader == 1 {
		follower = c.broker(2)
	}
	forward := func(info BrokerInfo) error {
		v, err := json.Marshal(info)
		if err != nil {
			t.Fatal(err)
		}
		batch := record.NewBatch(time.Now().UnixMilli(), []record.Record{{Key: []byte(brokerKey(info.NodeID)), Value: v}})
		ctx, cancel := context.WithTimeout(context.Background(), clusterWriteTimeout)
		defer cancel()
		_, err = follower.cfg.Cluster.Forward(ctx, follower.meta.raft.Group().ID(), leader, batch)
		return err
	}
	err := forward(BrokerInfo{NodeID: 3, Host: "stale", Port: 9092})
	if !errors.Is(err, raft.ErrForwarded) || !strings.Contains(err.Error(), "node 3 was removed (wharf cluster remove-node)") {
		t.Fatalf("node 3's registration forwarded after its removal: %v, want the leader's refusal naming the removal", err)
	}
	self := follower.cfg.NodeID
	if err := forward(BrokerInfo{NodeID: self, Host: "again", Port: 9092}); err != nil {
		t.Fatalf("node %d's registration forwarded: %v", self, err)
	}
}
