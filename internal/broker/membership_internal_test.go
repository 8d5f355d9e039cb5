package broker

import (
	"encoding/json"
	"testing"

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
