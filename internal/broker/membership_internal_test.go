package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// TestRemovedNodeRegistersNoMore: a broker registration of a node the
// metadata records as removed is ignored on apply (its process kept
// running, or came back before it saw its removal), as KRaft fences an
// unregistered broker; every replica applies the same records in the
// same order, so every node ignores it alike.
func TestRemovedNodeRegistersNoMore(t *testing.T) {
	st := newMetadataState()
	apply := func(key string, value any) {
		t.Helper()
		v, err := json.Marshal(value)
		if err == nil {
			err = st.apply(record.Record{Key: []byte(key), Value: v})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	apply(brokerKey(4), BrokerInfo{NodeID: 4, Host: "h4", Port: 9092})
	apply(nodeKeyPrefix+"4", nodeRecord{NodeID: 4, Addr: "h4:19301", Removed: true})
	if _, ok := st.brokers[4]; ok {
		t.Fatal("node 4 still registered after its removal")
	}
	apply(brokerKey(4), BrokerInfo{NodeID: 4, Host: "h4", Port: 9092})
	if _, ok := st.brokers[4]; ok {
		t.Fatal("node 4 registered again after its removal")
	}
	apply(brokerKey(5), BrokerInfo{NodeID: 5, Host: "h5", Port: 9092})
	if _, ok := st.brokers[5]; !ok {
		t.Fatal("node 5, never removed, did not register")
	}
}

// TestAddNodeRightAfterLeaderDies (issue 13): a node asks a follower to
// join right after the metadata leader is cut off from every node (as if
// killed -9), before the follower knows: the join's record, forwarded
// to the dead leader, goes to the new one once an election starts, and
// AddNode succeeds well within the metadata write timeout, where it
// used to wait it out and fail.
func TestAddNodeRightAfterLeaderDies(t *testing.T) {
	c := newTestCluster(t, 3)
	dead := c.leader()
	c.isolate(dead, true)
	member := c.broker(dead%3 + 1)
	if leader, _, _ := member.meta.raft.Leadership(); leader != uint64(dead) {
		t.Fatalf("node %d knows leader %d, not %d, before the election", member.cfg.NodeID, leader, dead)
	}
	start := time.Now()
	nodes, _, err := member.AddNode(4, "node4:19301")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("AddNode after the leader died: %v after %v", err, took)
	}
	if took >= clusterWriteTimeout/2 {
		t.Fatalf("AddNode after the leader died took %v: it waited on the dead leader", took)
	}
	if nodes[4] != "node4:19301" {
		t.Fatalf("AddNode answered nodes %v, without node 4", nodes)
	}
	t.Logf("node 4 recorded %v after the leader was cut off", took.Round(time.Millisecond))
}
