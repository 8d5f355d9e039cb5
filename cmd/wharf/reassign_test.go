package main

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wharf-mq/wharf/internal/node"
)

// TestMoveOff: remove-node's plan replaces the node in each partition
// that has it, in place (the preferred leader stays first unless it is
// the node), by the least loaded node the partition lacks; a partition
// with no such node makes the plan fail, naming it.
func TestMoveOff(t *testing.T) {
	md := kadm.Metadata{
		Brokers: kadm.BrokerDetails{{NodeID: 1}, {NodeID: 2}, {NodeID: 3}, {NodeID: 4}},
		Topics: kadm.TopicDetails{"t": {Topic: "t", Partitions: kadm.PartitionDetails{
			0: {Partition: 0, Replicas: []int32{1, 2, 3}},
			1: {Partition: 1, Replicas: []int32{2, 1, 4}},
			2: {Partition: 2, Replicas: []int32{2, 3, 4}},
		}}},
	}
	req, moves, err := moveOff(md, 1)
	if err != nil || moves != 2 {
		t.Fatalf("moveOff(1) = %d moves, %v", moves, err)
	}
	want := map[int32][]int32{0: {4, 2, 3}, 1: {2, 3, 4}}
	if len(req["t"]) != len(want) {
		t.Errorf("moves %v, want %v", req, want)
	}
	for p, replicas := range req["t"] {
		if !slices.Equal(replicas, want[p]) {
			t.Errorf("t-%d moves to %v, want %v", p, replicas, want[p])
		}
	}

	md.Topics["everywhere"] = kadm.TopicDetail{Topic: "everywhere", Partitions: kadm.PartitionDetails{
		0: {Partition: 0, Replicas: []int32{1, 2, 3, 4}}}}
	if _, _, err := moveOff(md, 1); err == nil || !strings.Contains(err.Error(), "everywhere-0") {
		t.Errorf("moveOff(1) with an RF4 partition on 4 nodes: %v, want a refusal naming everywhere-0", err)
	}
}

// TestJoinFlags: --join takes --node-id and --cluster-addr, and no
// --initial-cluster.
func TestJoinFlags(t *testing.T) {
	for _, c := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--node-id", "4", "--cluster-addr", "127.0.0.1:0", "--join", "127.0.0.1:19301"}, ""},
		{[]string{"--cluster-addr", "127.0.0.1:0", "--join", "127.0.0.1:19301"}, "--join needs --node-id"},
		{[]string{"--node-id", "4", "--join", "127.0.0.1:19301"}, "--join needs --node-id and --cluster-addr"},
		{[]string{"--node-id", "1", "--cluster-addr", "127.0.0.1:0", "--join", "127.0.0.1:19301",
			"--initial-cluster", "1@127.0.0.1:19301"}, "give one of them"},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		f := clusterServeFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		var cfg node.Config
		err := f.apply(&cfg)
		var ue usageError
		switch {
		case c.wantErr == "" && (err != nil || cfg.Cluster == nil || cfg.Cluster.Join != "127.0.0.1:19301" || cfg.NodeID != 4):
			t.Errorf("%v: %v, cluster %+v", c.args, err, cfg.Cluster)
		case c.wantErr != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%v: %v, want a usage error with %q", c.args, err, c.wantErr)
		}
	}
}
