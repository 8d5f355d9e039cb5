package raft_test

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// TestGroupOpenedLateOnARestartedNodeCatchesUp: a restarted node opens
// its groups one after another (a cluster node opens the metadata group,
// replays it, then opens its partitions), and its host pings its peers
// as soon as it hosts the first. A quiesced leader of a group the node
// has not opened yet is woken by that first ping, heartbeats into the
// void and quiesces again; the replica opened afterwards must still
// learn the commit index within a few ticks, not only once it campaigns
// (an election timeout for a voter, never for a learner).
func TestGroupOpenedLateOnARestartedNodeCatchesUp(t *testing.T) {
	c, lead, follower := restartFollowerOfQuiescedGroup(t)
	leaderLog := c.nodes[lead].logs[lateGroup]
	// Long enough for the first ping, the leader's wake-up and its
	// quiescing again, well short of an election timeout.
	c.ticks(4)
	c.waitFor(t, "the partition group quiesced again on its leader", 40, leaderLog.Group().Quiesced)
	late := c.openLate(t, follower)
	// Under an election timeout (ten ticks), after which the follower
	// would have campaigned and woken the group anyway.
	c.waitFor(t, "the partition replica opened late to learn the commit index", 5*stepsPerTick, func() bool {
		return late.HighWatermark() == lateRecords
	})
}

// TestGroupOpenedWhileItsLeaderIdlesCatchesUp: the replica opens while
// its leader, woken by the node's first ping, is still awake but idle:
// its last heartbeat went into the void and its next tick would quiesce
// the group. Nodes tick on clocks of their own, so the ping of the
// replica's incarnation can reach the leader just then; that wake-up
// must still cost the leader a heartbeat before it quiesces, or the
// replica waits for an election timeout (a learner for ever).
func TestGroupOpenedWhileItsLeaderIdlesCatchesUp(t *testing.T) {
	c, lead, follower := restartFollowerOfQuiescedGroup(t)
	leaderLog := c.nodes[lead].logs[lateGroup]
	c.tick(follower) // the first ping: the leader wakes the group
	c.process(c.ids...)
	c.tick(lead) // an idle tick: the leader heartbeats the next step,
	c.process(c.ids...)
	c.process(c.ids...) // and its heartbeat finds no replica
	if leaderLog.Group().Quiesced() {
		t.Fatal("the leader quiesced the group at its first idle tick: the test shows nothing")
	}
	late := c.openLate(t, follower)
	c.tick(follower) // the ping of the reopened replica, heard while the group is awake
	c.process(c.ids...)
	c.waitFor(t, "the partition replica opened while its leader idled to learn the commit index", 5*stepsPerTick, func() bool {
		return late.HighWatermark() == lateRecords
	})
}

// The group the tests of late replicas reopen on a restarted node, after
// the group the node opens first; and how many records it has.
const (
	firstGroup, lateGroup = 1, 2
	lateRecords           = 20
)

// restartFollowerOfQuiescedGroup is three nodes with groups firstGroup
// and lateGroup; lateRecords records committed in lateGroup, which its
// leader lead quiesced; and follower, a follower of lateGroup, restarted
// with only firstGroup open again.
func restartFollowerOfQuiescedGroup(t *testing.T) (c *memCluster, lead, follower uint64) {
	t.Helper()
	c = newMemCluster(t, 3)
	c.open(c.ids, firstGroup, lateGroup)
	lead = c.waitLeader(t, lateGroup, 200)
	for i := range lateRecords {
		batch := record.NewBatch(int64(i), []record.Record{{Value: fmt.Appendf(nil, "r%d", i)}})
		if _, err := c.nodes[lead].logs[lateGroup].Append(batch, replica.AppendOptions{AckCommitted: true}); err != nil {
			t.Fatal(err)
		}
		c.step()
	}
	leaderLog := c.nodes[lead].logs[lateGroup]
	c.waitFor(t, "the partition group quiesced with every record committed", 200, func() bool {
		return leaderLog.Group().Quiesced() && leaderLog.HighWatermark() == lateRecords
	})
	follower = c.ids[0]
	if follower == lead {
		follower = c.ids[1]
	}
	c.stop(follower)
	c.start(follower)
	c.open([]uint64{follower}, firstGroup)
	return c, lead, follower
}

// openLate opens lateGroup on the restarted follower, and processes its
// host alone once: the replica then applies what the commit index it saved
// covers, which must not be every record, or the test shows nothing.
func (c *memCluster) openLate(t *testing.T, follower uint64) *replica.RaftLog {
	t.Helper()
	c.open([]uint64{follower}, lateGroup)
	c.process(follower)
	late := c.nodes[follower].logs[lateGroup]
	if hw := late.HighWatermark(); hw == lateRecords {
		t.Fatalf("the restarted follower knows the commit index already (high watermark %d): the test shows nothing", hw)
	}
	return late
}

// memCluster is hosts on a MemNetwork, driven step by step: a step
// processes every host and ends its sync rounds at once; every
// stepsPerTick steps every host ticks.
type memCluster struct {
	t     *testing.T
	net   *raft.MemNetwork
	ids   []uint64
	nodes map[uint64]*memNode
	steps int
	// wrap, if set, is what a node's host sends through in place of the
	// network's transport.
	wrap func(id uint64, tr raft.Transport) raft.Transport
}

type memNode struct {
	dir  string
	host *raft.Host
	logs map[uint64]*replica.RaftLog
}

const stepsPerTick = 4

func newMemCluster(t *testing.T, n int) *memCluster {
	return newWrappedMemCluster(t, n, nil)
}

// newWrappedMemCluster is newMemCluster whose hosts send through wrap.
func newWrappedMemCluster(t *testing.T, n int, wrap func(id uint64, tr raft.Transport) raft.Transport) *memCluster {
	c := &memCluster{t: t, net: raft.NewMemNetwork(), nodes: map[uint64]*memNode{}, wrap: wrap}
	base := t.TempDir()
	for id := uint64(1); id <= uint64(n); id++ {
		c.ids = append(c.ids, id)
		c.nodes[id] = &memNode{dir: filepath.Join(base, fmt.Sprint(id))}
		c.start(id)
	}
	t.Cleanup(func() {
		for _, id := range c.ids {
			if c.nodes[id].host != nil {
				c.stop(id)
			}
		}
	})
	return c
}

func (c *memCluster) start(id uint64) {
	tr := c.net.Transport(id)
	if c.wrap != nil {
		tr = c.wrap(id, tr)
	}
	// The steps drive the clock: a tick interval of an hour keeps a
	// leader's lease (Group.Status) from running out on the wall clock
	// while the test process stalls (slow fsyncs, the race detector).
	h, err := raft.NewHost(raft.Config{NodeID: id, Transport: tr, TickInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		c.t.Fatal(err)
	}
	nd := c.nodes[id]
	nd.host, nd.logs = h, map[uint64]*replica.RaftLog{}
	c.net.Register(id, h)
}

// open opens groups on nodes, every node of the cluster a voter.
func (c *memCluster) open(nodes []uint64, groups ...uint64) {
	for _, id := range nodes {
		nd := c.nodes[id]
		for _, g := range groups {
			l, err := replica.OpenRaft(filepath.Join(nd.dir, fmt.Sprint(g)), replica.DefaultConfig(), replica.RaftOptions{
				Host: nd.host, Group: g, Members: c.ids, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				c.t.Fatalf("node %d group %d: %v", id, g, err)
			}
			nd.logs[g] = l
		}
	}
}

// stop closes a node's replicas and host; its files stay.
func (c *memCluster) stop(id uint64) {
	nd := c.nodes[id]
	c.net.Unregister(id)
	for _, l := range nd.logs {
		l.Close()
	}
	nd.host.Close()
	nd.host, nd.logs = nil, nil
}

func (c *memCluster) step() {
	c.steps++
	c.process(c.ids...)
	if c.steps%stepsPerTick == 0 {
		c.tick(c.ids...)
	}
}

// process processes the hosts of nodes, those running, once each in the
// order given, and ends their sync rounds at once.
func (c *memCluster) process(nodes ...uint64) {
	for _, id := range nodes {
		if h := c.nodes[id].host; h != nil {
			if b := h.Process(); b != nil {
				b.Run(1)
				h.Synced(b)
			}
		}
	}
}

// tick ticks the hosts of nodes, those running, in the order given.
func (c *memCluster) tick(nodes ...uint64) {
	for _, id := range nodes {
		if h := c.nodes[id].host; h != nil {
			h.Tick()
		}
	}
}

func (c *memCluster) ticks(n int) {
	for range n * stepsPerTick {
		c.step()
	}
}

func (c *memCluster) waitFor(t *testing.T, what string, steps int, cond func() bool) {
	t.Helper()
	for range steps {
		if cond() {
			return
		}
		c.step()
	}
	if !cond() {
		t.Fatalf("after %d steps, still waiting for %s", steps, what)
	}
}

func (c *memCluster) waitLeader(t *testing.T, g uint64, steps int) uint64 {
	t.Helper()
	var lead uint64
	c.waitFor(t, fmt.Sprintf("a leader of group %d", g), steps, func() bool {
		for _, id := range c.ids {
			if l := c.nodes[id].logs[g]; l != nil && l.Group().Status().Leading() {
				lead = id
				return true
			}
		}
		return false
	})
	return lead
}
