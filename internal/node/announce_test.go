package node

import (
	"testing"

	"github.com/wharf-mq/wharf/internal/raft"
)

// TestTakeAnnouncementRefusesNonMembers: an announced address is taken
// only for a member of the metadata group, never for an unknown or
// removed id, nor for this node itself.
func TestTakeAnnouncementRefusesNonMembers(t *testing.T) {
	tr, err := raft.ListenTCP(raft.TCPConfig{NodeID: 2, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	members := []uint64{1, 2, 4}
	for _, tc := range []struct {
		id    int32
		taken bool
	}{{4, true}, {3, false}, {5, false}, {2, false}} {
		err := takeAnnouncement(tr, 2, members, joinRequest{NodeID: tc.id, Addr: "127.0.0.1:1", Announce: true})
		if (err == nil) != tc.taken {
			t.Errorf("node %d announced to node 2 with members %v: err %v, want taken %v", tc.id, members, err, tc.taken)
		}
	}
}
