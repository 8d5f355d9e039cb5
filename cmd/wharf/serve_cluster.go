package main

import (
	"flag"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/node"
)

// clusterFlags are the flags that make `wharf serve` one node of a
// cluster (issue 13): --node-id, --cluster-addr and either
// --initial-cluster (a node of the cluster as it starts) or --join (a
// node added to a running one), or none for a single node; and Kafka's
// replication settings.
type clusterFlags struct {
	nodeID                    *int
	addr, initial, join       *string
	electionTimeout           *time.Duration
	controlledShutdownTimeout *time.Duration

	minInsync      *int
	autoRebalance  *bool
	imbalanceCheck *time.Duration
}

// clusterEnv lists the cluster flags settable by environment variable.
var clusterEnv = []string{"node-id", "cluster-addr", "initial-cluster", "join", "election-timeout",
	"controlled-shutdown-timeout", "min-insync-replicas", "auto-leader-rebalance", "leader-imbalance-check-interval"}

// The bounds of --election-timeout: a Raft tick is a tenth of it, and
// a tick under 10 ms costs a busy node more than it saves.
const (
	minElectionTimeout = 100 * time.Millisecond
	maxElectionTimeout = time.Minute
)

// maxControlledShutdownTimeout bounds --controlled-shutdown-timeout: a
// supervisor waits for a stopping process only so long (systemd's
// default is 90 s) before it kills it.
const maxControlledShutdownTimeout = time.Minute

func clusterServeFlags(fs *flag.FlagSet) clusterFlags {
	return clusterFlags{
		nodeID:  fs.Int("node-id", 0, "this node's id, the broker id Kafka clients see (0: 1; in a cluster, its id in --initial-cluster)"),
		addr:    fs.String("cluster-addr", "", "address this node listens on for the other nodes' Raft traffic (empty: a single node)"),
		initial: fs.String("initial-cluster", "", "every node of the cluster as ID@HOST:PORT,... (their --cluster-addr), this one included"),
		electionTimeout: fs.Duration("election-timeout", time.Second,
			"how long a follower hears nothing from its leader before it stands for election (a leader's heartbeats and the Raft tick are a tenth of it)"),
		controlledShutdownTimeout: fs.Duration("controlled-shutdown-timeout", 10*time.Second,
			"on SIGINT or SIGTERM, how long a cluster node first spends handing the leadership of its partitions, metadata and quorum queues to other nodes, so that clients move without waiting for an election (controlled.shutdown.enable); 0: stop at once"),
		join: fs.String("join", "", "the --cluster-addr HOST:PORT of any node of a running cluster, for a new node (with an empty --data-dir) to join it under --node-id"),

		minInsync: fs.Int("min-insync-replicas", 0,
			"default min.insync.replicas of every topic: acks=all to a partition with fewer replicas in sync gets NOT_ENOUGH_REPLICAS (0: min(2, the topic's replication factor))"),
		autoRebalance: fs.Bool("auto-leader-rebalance", true,
			"in a cluster, move each partition's leadership back to its preferred replica (the first) when it is in sync (auto.leader.rebalance.enable)"),
		imbalanceCheck: fs.Duration("leader-imbalance-check-interval", 300*time.Second,
			"how often --auto-leader-rebalance looks for partitions led away from their preferred replica (leader.imbalance.check.interval.seconds)"),
	}
}

// apply checks the cluster flags and sets the node's id, cluster and
// replication settings.
func (f clusterFlags) apply(cfg *node.Config) error {
	if *f.nodeID < 0 || *f.nodeID > 1<<31-1 {
		return usagef("--node-id must be between 0 and %d, got %d", 1<<31-1, *f.nodeID)
	}
	if *f.minInsync < 0 {
		return usagef("--min-insync-replicas must be 0 (the default rule) or more, got %d", *f.minInsync)
	}
	if *f.imbalanceCheck <= 0 {
		return usagef("--leader-imbalance-check-interval must be positive, got %v", *f.imbalanceCheck)
	}
	cfg.MinInsyncReplicas, cfg.AutoLeaderRebalance, cfg.LeaderImbalanceCheck = *f.minInsync, f.autoRebalance, *f.imbalanceCheck
	cfg.NodeID = int32(*f.nodeID)
	if *f.addr == "" && *f.initial == "" && *f.join == "" {
		return nil
	}
	timeout := *f.electionTimeout
	if timeout < minElectionTimeout || timeout > maxElectionTimeout {
		return usagef("--election-timeout must be between %v and %v, got %v", minElectionTimeout, maxElectionTimeout, timeout)
	}
	if handOff := *f.controlledShutdownTimeout; handOff < 0 || handOff > maxControlledShutdownTimeout {
		return usagef("--controlled-shutdown-timeout must be between 0 and %v, got %v", maxControlledShutdownTimeout, handOff)
	}
	// The election timeout is ten ticks (node.ClusterConfig).
	tick := timeout / 10
	switch {
	case *f.initial != "" && *f.join != "":
		return usagef("--initial-cluster starts a cluster and --join joins a running one: give one of them")
	case *f.join != "" && (*f.addr == "" || *f.nodeID == 0):
		return usagef("--join needs --node-id and --cluster-addr")
	case *f.join != "":
		cfg.Cluster = &node.ClusterConfig{Addr: *f.addr, Join: *f.join, TickInterval: tick,
			ControlledShutdownTimeout: *f.controlledShutdownTimeout}
		return nil
	case *f.addr == "" || *f.initial == "" || *f.nodeID == 0:
		return usagef("--node-id, --cluster-addr and --initial-cluster go together")
	}
	nodes, err := parseInitialCluster(*f.initial)
	if err != nil {
		return err
	}
	if _, ok := nodes[int32(*f.nodeID)]; !ok {
		return usagef("--initial-cluster %q does not name --node-id %d", *f.initial, *f.nodeID)
	}
	cfg.Cluster = &node.ClusterConfig{Addr: *f.addr, Nodes: nodes, TickInterval: tick,
		ControlledShutdownTimeout: *f.controlledShutdownTimeout}
	return nil
}

// parseInitialCluster parses ID@HOST:PORT,...
func parseInitialCluster(s string) (map[int32]string, error) {
	nodes := map[int32]string{}
	for _, item := range strings.Split(s, ",") {
		idText, addr, ok := strings.Cut(strings.TrimSpace(item), "@")
		id, err := strconv.ParseInt(idText, 10, 32)
		if !ok || err != nil || id <= 0 || addr == "" {
			return nil, usagef("--initial-cluster: %q is not ID@HOST:PORT with an id above 0", item)
		}
		if _, dup := nodes[int32(id)]; dup {
			return nil, usagef("--initial-cluster names node %d twice", id)
		}
		nodes[int32(id)] = addr
	}
	return nodes, nil
}
