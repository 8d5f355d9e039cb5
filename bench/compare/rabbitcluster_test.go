package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestRabbitClusterNodesShareCookieAndEpmdOnly(t *testing.T) {
	nodes := rabbitClusterNodes("/w/rc", []int{4369, 5001, 6001, 7001, 5002, 6002, 7002, 5003, 6003, 7003})
	if len(nodes) != 3 {
		t.Fatalf("%d nodes from 10 ports, want 3", len(nodes))
	}
	seen := map[string]bool{}
	for i, n := range nodes {
		env := n.env()
		for _, want := range []string{
			"RABBITMQ_NODENAME=" + []string{"rabbit1", "rabbit2", "rabbit3"}[i] + "@localhost",
			"HOME=/w/rc/home",    // one cookie for all
			"ERL_EPMD_PORT=4369", // one epmd for all
		} {
			if !slices.Contains(env, want) {
				t.Errorf("node %d env lacks %q: %v", i+1, want, env)
			}
		}
		for _, own := range []string{n.name, n.dir, n.pidFile(), "amqp" + strconv.Itoa(n.amqpPort), "dist" + strconv.Itoa(n.distPort),
			"mgmt" + strconv.Itoa(n.mgmtPort)} {
			if seen[own] {
				t.Errorf("node %d shares %q with another node", i+1, own)
			}
			seen[own] = true
		}
		if conf := n.conf(); !strings.Contains(conf, "listeners.tcp.1 = 127.0.0.1:"+strconv.Itoa(n.amqpPort)+"\n") ||
			!strings.Contains(conf, "management.tcp.port = "+strconv.Itoa(n.mgmtPort)+"\n") {
			t.Errorf("node %d conf does not listen on its AMQP and management ports:\n%s", i+1, conf)
		}
		if n.plugins() != "[rabbitmq_management].\n" {
			t.Errorf("node %d enables %q, want the management plugin only", i+1, n.plugins())
		}
	}
}

func TestRunningNodesReadsClusterStatusJSON(t *testing.T) {
	out := "Cluster status of node rabbit1@localhost ...\n" +
		`{"disk_nodes":["rabbit1@localhost","rabbit2@localhost"],"running_nodes":["rabbit2@localhost","rabbit1@localhost"]}`
	got, err := runningNodes(out)
	if err != nil || !slices.Equal(got, []string{"rabbit1@localhost", "rabbit2@localhost"}) {
		t.Fatalf("runningNodes = %v, %v", got, err)
	}
	if _, err := runningNodes("Error: unable to perform an operation on node"); err == nil {
		t.Fatal("no error for output without JSON")
	}
}

func TestQuorumClusterWorkloadNamesIssue14Setup(t *testing.T) {
	label := quorumClusterWorkload(quorumClusterFlow, "Wharf vs RabbitMQ, 3 nodes each")
	for _, want := range []string{"quorum queue of 3 members", "1 KiB persistent", "≤256 unconfirmed", "prefetch 256",
		"publisher and consumer on the queue's leader's node", "Wharf vs RabbitMQ, 3 nodes each"} {
		if !strings.Contains(label, want) {
			t.Errorf("label lacks %q: %s", want, label)
		}
	}
}
