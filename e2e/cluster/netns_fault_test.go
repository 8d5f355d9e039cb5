//go:build linux

package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clusterNet gives each node of a test cluster a network namespace of
// its own, joined to a bridge in the test's namespace by a veth pair: the
// nodes reach each other and the test's clients reach every node, each at
// its own address, until cut severs a link between two nodes (a blackhole
// route on each side: packets vanish, as in a real partition).
type clusterNet struct {
	t      *testing.T
	subnet string // the first three octets of the /24
	ns     []string
}

// newClusterNet makes the bridge and n namespaces, removed at the test's
// end. It needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and ip(8): without
// them the test fails, saying so.
func newClusterNet(t *testing.T, n int) *clusterNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("network partitions are made with network namespaces: run the tests as root, as .ci/run does, or with -short")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("network partitions are made with ip(8) (iproute2), which is missing: install it, or run with -short")
	}
	var id [4]byte
	rand.Read(id[:])
	suffix := hex.EncodeToString(id[:])
	// A /24 of its own, so tests running at once on the machine do not
	// share addresses.
	cn := &clusterNet{t: t, subnet: fmt.Sprintf("10.%d.%d", 150+int(id[0])%50, id[1])}
	bridge := "wb" + suffix
	cn.run("link", "add", bridge, "type", "bridge")
	t.Cleanup(func() { exec.Command("ip", "link", "del", bridge).Run() })
	cn.run("addr", "add", cn.subnet+".1/24", "dev", bridge)
	cn.run("link", "set", bridge, "up")
	for i := range n {
		name := fmt.Sprintf("wharf-%s-%d", suffix, i+1)
		hostEnd, nsEnd := fmt.Sprintf("wh%s%d", suffix, i+1), fmt.Sprintf("wn%s%d", suffix, i+1)
		cn.run("netns", "add", name)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
		cn.run("link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd)
		cn.run("link", "set", nsEnd, "netns", name)
		cn.run("link", "set", hostEnd, "master", bridge, "up")
		cn.run("-n", name, "addr", "add", cn.addr(i+1)+"/24", "dev", nsEnd)
		cn.run("-n", name, "link", "set", nsEnd, "up")
		cn.run("-n", name, "link", "set", "lo", "up")
		cn.ns = append(cn.ns, name)
	}
	return cn
}

func (cn *clusterNet) run(args ...string) {
	cn.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		cn.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// addr is node id's address.
func (cn *clusterNet) addr(id int) string { return fmt.Sprintf("%s.%d", cn.subnet, 10+id) }

// cut severs the link between every node of a and every node of b, both
// ways; heal mends it.
func (cn *clusterNet) cut(a, b []*node)  { cn.routes("add", a, b) }
func (cn *clusterNet) heal(a, b []*node) { cn.routes("del", a, b) }

func (cn *clusterNet) routes(op string, a, b []*node) {
	cn.t.Helper()
	for _, x := range a {
		for _, y := range b {
			cn.run("-n", cn.ns[x.id-1], "route", op, "blackhole", cn.addr(y.id)+"/32")
			cn.run("-n", cn.ns[y.id-1], "route", op, "blackhole", cn.addr(x.id)+"/32")
		}
	}
}

// startNetCluster starts one node in each namespace of cn, listening on
// its namespace's address: the node's binary is a script that enters the
// namespace and runs wharf there (same process id, so signals reach it).
func startNetCluster(t *testing.T, cn *clusterNet) []*node {
	t.Helper()
	bin := wharfBinary(t)
	base := t.TempDir()
	nodes := make([]*node, len(cn.ns))
	var initial []string
	for i, name := range cn.ns {
		id := i + 1
		wrapper := filepath.Join(base, fmt.Sprintf("wharf-in-%d", id))
		script := fmt.Sprintf("#!/bin/sh\nexec ip netns exec %s %s \"$@\"\n", name, bin)
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		nodes[i] = &node{t: t, id: id, bin: wrapper, dataDir: filepath.Join(base, fmt.Sprint("node", id)),
			kafkaAddr: cn.addr(id) + ":9092", clusterAddr: cn.addr(id) + ":9093", logPath: filepath.Join(base, fmt.Sprintf("node%d.log", id))}
		initial = append(initial, fmt.Sprintf("%d@%s", id, nodes[i].clusterAddr))
	}
	for _, nd := range nodes {
		nd.initial = strings.Join(initial, ",")
		nd.start()
	}
	for _, nd := range nodes {
		nd.waitReady()
	}
	return nodes
}

// TestLeaderIsolatedFault: five nodes, each in its own network namespace,
// an RF5 topic. The leader of partition 0 and one other node are cut off
// from the other three (the clients still reach all five). A Produce sent
// straight to the isolated leader is never acknowledged; the majority
// elects a new leader and the load goes on there (for franz-go and
// sarama; kafka-go may be asking a minority node); the isolated leader
// stops claiming the partition. After the partition heals, nothing
// acknowledged is lost.
func TestLeaderIsolatedFault(t *testing.T) {
	requireFaultRun(t)
	ctx := faultContext(t)
	cn := newClusterNet(t, 5)
	ft := newFaultTest(ctx, t, startNetCluster(t, cn), "isolated", 3, 5)
	direct := newDirectClient(t, ft.seeds())
	topicID := ft.topicID()
	probe := ft.ledger.openProbe("isolated", 0)
	ft.run(1, func() {
		old := ft.leaderOf(nil, 0, -1)
		minority := []*node{old, ft.others(old)[0]}
		majority := ft.others(minority...)
		cn.cut(minority, majority)
		cutAt := time.Now()
		seq, v := ft.ledger.next(probe)
		code, err := produceTo(ctx, direct, int32(old.id), ft.topic, topicID, 0, v)
		if err == nil && code == nil {
			ft.ledger.ack(probe, seq)
			t.Errorf("node %d, cut off with a minority, acknowledged an acks=all Produce", old.id)
		}
		t.Logf("Produce sent to the isolated leader: %v", firstErr(err, code))
		elected := ft.leaderOf(majority, 0, int32(old.id))
		t.Logf("nodes %d and %d cut off; node %d elected by the majority %v after the cut", old.id, minority[1].id, elected.id,
			time.Since(cutAt).Round(time.Millisecond))
		// A minority node cannot tell the majority's nodes from dead
		// ones: it must keep listing them, or a client that keeps only
		// the brokers a Metadata answer lists (sarama) asks the
		// minority alone, for leaders it cannot know, until it heals.
		ft.waitListed(minority, majority, "the minority to keep listing the majority's brokers")
		// kafka-go asks for metadata over one connection to one seed
		// only: if that is a minority node, it sees no leader (the
		// minority cannot know the new one) until the partition heals,
		// and its streams wait; checked after healing.
		ft.progress(100, "with the leader isolated", "kafkago")
		ft.waitView([]*node{old}, "the isolated leader to stop claiming the partition", func(v map[int32]partitionView) bool {
			return v[0].leader != int32(old.id)
		})
		cn.heal(minority, majority)
		ft.waitHealthy("the partition healed")
		ft.progress(50, "after the partition healed")
	})
}
