//go:build linux

package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
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
// them the test fails, saying so. Each removal is registered before the
// thing is made, so a test that fails half-way through leaves nothing;
// what a test process that died without its cleanups (a -timeout panic,
// a SIGKILL) left is removed by the next one (sweepNetLeaks).
func newClusterNet(t *testing.T, n int) *clusterNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("network partitions are made with network namespaces: run the tests as root, as .ci/run does, or with -short")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("network partitions are made with ip(8) (iproute2), which is missing: install it, or run with -short")
	}
	sweepNetLeaks(t)
	var id [2]byte
	rand.Read(id[:])
	// The names carry this process's id (netOwner), so a sweep can tell
	// the leaks of a dead test process from another live test's.
	suffix := fmt.Sprintf("%xx%s", os.Getpid(), hex.EncodeToString(id[:]))
	// A /24 of its own, so tests running at once on the machine do not
	// share addresses.
	cn := &clusterNet{t: t, subnet: fmt.Sprintf("10.%d.%d", 150+int(id[0])%50, id[1])}
	bridge := "wb" + suffix
	t.Cleanup(func() { exec.Command("ip", "link", "del", bridge).Run() })
	cn.run("link", "add", bridge, "type", "bridge")
	cn.run("addr", "add", cn.subnet+".1/24", "dev", bridge)
	cn.run("link", "set", bridge, "up")
	for i := range n {
		name := fmt.Sprintf("wharf-%s-%d", suffix, i+1)
		hostEnd, nsEnd := fmt.Sprintf("wh%s%d", suffix, i+1), fmt.Sprintf("wn%s%d", suffix, i+1)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
		cn.run("netns", "add", name)
		// Deleting either end deletes the pair (and deleting the
		// namespace its end, once moved there).
		t.Cleanup(func() { exec.Command("ip", "link", "del", hostEnd).Run() })
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

// netOwner matches the names newClusterNet gives namespaces and bridges,
// capturing the creating process's id (hex).
var netOwner = regexp.MustCompile(`^(?:wharf-|wb)([0-9a-f]+)x[0-9a-f]{4}(?:-\d+)?$`)

// sweepNetLeaks removes the namespaces and bridges of test processes that
// are gone: a process killed before its cleanups ran leaves them behind,
// and their routes and addresses would linger on the machine. Those of
// live processes (other tests running now) are left alone.
func sweepNetLeaks(t *testing.T) {
	t.Helper()
	gone := func(name string) bool {
		m := netOwner.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, err := strconv.ParseInt(m[1], 16, 32)
		return err == nil && syscall.Kill(int(pid), 0) == syscall.ESRCH
	}
	namespaces, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(namespaces), "\n") {
		if name, _, _ := strings.Cut(line, " "); gone(name) {
			t.Logf("removing namespace %s, left by a test process that is gone", name)
			exec.Command("ip", "netns", "del", name).Run()
		}
	}
	bridges, _ := exec.Command("ip", "-o", "link", "show", "type", "bridge").Output()
	for _, line := range strings.Split(string(bridges), "\n") {
		// "7: wb1a2bx3c4d: <BROADCAST,…"
		if _, rest, ok := strings.Cut(line, ": "); ok {
			if name, _, _ := strings.Cut(rest, ":"); gone(name) {
				t.Logf("removing bridge %s, left by a test process that is gone", name)
				exec.Command("ip", "link", "del", name).Run()
			}
		}
	}
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
// its namespace's address.
func startNetCluster(t *testing.T, cn *clusterNet) []*node {
	t.Helper()
	nodes := prepareNetCluster(t, cn)
	startAll(nodes)
	return nodes
}

// prepareNetCluster is startNetCluster without the start (the caller
// may give the nodes more flags first): the node's binary is a script
// that enters the namespace and runs wharf there (same process id, so
// signals reach it).
func prepareNetCluster(t *testing.T, cn *clusterNet) []*node {
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
