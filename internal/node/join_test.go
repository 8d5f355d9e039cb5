package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
)

// TestClusterNodesAtStart: what a cluster node takes for the cluster's
// nodes as it starts, from its flags and the address book its broker
// wrote (broker.ReadAddressBook). Nodes 1 to 3 started the cluster, node
// 4 joined and node 3 was removed since.
func TestClusterNodesAtStart(t *testing.T) {
	initial := map[int32]string{1: "a1:1", 2: "a2:1", 3: "a3:1"}
	book := `{"1":"a1:1","2":"a2:1","4":"a4:1"}`
	self4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 4), Port: 1}
	for _, tc := range []struct {
		name    string
		nodeID  int32
		cluster ClusterConfig
		book    string
		addr    net.Addr
		want    map[int32]string
		asked   bool // it asks the member to join
	}{
		{"a new cluster", 1, ClusterConfig{Nodes: initial}, "", nil, initial, false},
		// Node 3 is neither dialled nor asked; node 4 is found; the
		// flags' addresses win over the book's.
		{"an initial node after changes", 1, ClusterConfig{Nodes: map[int32]string{1: "a1:2", 2: "a2:2", 3: "a3:2"}},
			book, nil, map[int32]string{1: "a1:2", 2: "a2:2", 4: "a4:1"}, false},
		{"a joined node started again", 4, ClusterConfig{Join: "127.0.0.1:1"},
			`{"1":"a1:1","2":"a2:1","4":"127.0.0.4:1"}`, self4, map[int32]string{1: "a1:1", 2: "a2:1", 4: "127.0.0.4:1"}, false},
		{"a joined node at another address", 4, ClusterConfig{Join: "127.0.0.1:1"}, book, self4, nil, true},
		{"a node joining", 4, ClusterConfig{Join: "127.0.0.1:1"}, "", self4, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.book != "" {
				if err := os.WriteFile(filepath.Join(dir, "cluster-nodes.json"), []byte(tc.book), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// A join asked gives up at once: the member is not there.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			cfg := Config{DataDir: dir, NodeID: tc.nodeID, Cluster: &tc.cluster}
			nodes, _, err := clusterNodes(ctx, cfg, tc.addr, slog.New(slog.DiscardHandler))
			if asked := err != nil && strings.Contains(err.Error(), "joining the cluster through"); asked != tc.asked {
				t.Fatalf("asked to join: %v (%v), want %v", asked, err, tc.asked)
			}
			if !tc.asked && (err != nil || !maps.Equal(nodes, tc.want)) {
				t.Fatalf("nodes %v, %v; want %v", nodes, err, tc.want)
			}
		})
	}
}

// TestJoinAsksAgainWhileNotRecorded: a member that could not record the
// join in the metadata log (its group electing a leader) is asked again
// until it does, where a refusal for any other reason ends the join at
// once.
func TestJoinAsksAgainWhileNotRecorded(t *testing.T) {
	member, err := raft.ListenTCP(raft.TCPConfig{NodeID: 1, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	var asked atomic.Int32
	refusal := fmt.Errorf("%w: storage error: write metadata: context deadline exceeded", errJoinNotRecorded)
	member.SetJoinHandler(func(context.Context, []byte) ([]byte, error) {
		if asked.Add(1) == 1 {
			return nil, refusal
		}
		return json.Marshal(joinReply{Nodes: map[int32]string{1: "127.0.0.1:1", 4: "127.0.0.4:1"}, MetadataEnd: 7})
	})
	member.Start(discardEnvelopes{})
	self := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 4), Port: 1}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	reply, err := join(ctx, member.Addr().String(), 4, self, slog.New(slog.DiscardHandler))
	if err != nil || reply.MetadataEnd != 7 || asked.Load() != 2 {
		t.Fatalf("join after a refusal to ask again: %+v, %v, asked %d times; want the reply on the second", reply, err, asked.Load())
	}

	asked.Store(0)
	member.SetJoinHandler(func(context.Context, []byte) ([]byte, error) {
		asked.Add(1)
		return nil, errors.New("node id taken: node 4 is a member already, at 127.0.0.9:1")
	})
	if _, err := join(ctx, member.Addr().String(), 4, self, slog.New(slog.DiscardHandler)); err == nil || asked.Load() != 1 {
		t.Fatalf("join refused for a taken id: %v, asked %d times; want the refusal, asked once", err, asked.Load())
	}
}
