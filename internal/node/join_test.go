package node

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
