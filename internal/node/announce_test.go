package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

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

// TestAnnouncerRetriesUntilTaken: node 4 tells node 2 (lower) its
// address, asking again while node 2 cannot tell a member yet.
func TestAnnouncerRetriesUntilTaken(t *testing.T) {
	lower, err := raft.ListenTCP(raft.TCPConfig{NodeID: 2, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer lower.Close()
	var asked atomic.Int32
	taken := make(chan joinRequest, 1)
	lower.SetJoinHandler(func(_ context.Context, request []byte) ([]byte, error) {
		if asked.Add(1) == 1 {
			return nil, errNotServingYet
		}
		var req joinRequest
		if err := json.Unmarshal(request, &req); err != nil {
			return nil, err
		}
		taken <- req
		return nil, nil
	})
	lower.Start(discardEnvelopes{})
	self := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9004}
	a := startAnnouncer(t.Context(), 4, self, map[int32]string{2: lower.Addr().String(), 4: self.String()}, slog.Default())
	defer a.stop()
	select {
	case req := <-taken:
		if !req.Announce || req.NodeID != 4 || req.Addr != self.String() {
			t.Errorf("node 2 was told %+v, want node 4's announcement at %s", req, self)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("node 2 took no announcement after %d requests", asked.Load())
	}
}

// discardEnvelopes is a transport's handler that drops what arrives.
type discardEnvelopes struct{}

func (discardEnvelopes) Deliver(uint64, []raft.Envelope) {}
func (discardEnvelopes) Connected(uint64)                {}
func (discardEnvelopes) Disconnected(uint64)             {}
