package replica_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
	"github.com/wharf-mq/wharf/internal/replica/replicatest"
)

var quiet = slog.New(slog.DiscardHandler)

// startHost starts a host for node id on net (nil: no peers), closed by
// the test's cleanup.
func startHost(t testing.TB, id uint64, net *raft.MemNetwork) *raft.Host {
	t.Helper()
	return startHostTicking(t, id, net, 10*time.Millisecond)
}

// startHostTicking is startHost with ticks of tick.
func startHostTicking(t testing.TB, id uint64, net *raft.MemNetwork, tick time.Duration) *raft.Host {
	t.Helper()
	cfg := raft.Config{NodeID: id, TickInterval: tick, Logger: quiet}
	if net != nil {
		cfg.Transport = net.Transport(id)
	}
	h, err := raft.NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if net != nil {
		net.Register(id, h)
	}
	h.Start()
	t.Cleanup(h.Close)
	return h
}

func openRaft(t testing.TB, dir string, h *raft.Host, members ...uint64) *replica.RaftLog {
	t.Helper()
	l, err := replica.OpenRaft(dir, replica.DefaultConfig(), replica.RaftOptions{Host: h, Group: 7, Members: members, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func waitLeading(t testing.TB, l *replica.RaftLog) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !l.Group().Status().Leading() {
		if time.Now().After(deadline) {
			t.Fatalf("no leader after 10s: %+v", l.Group().Status())
		}
		time.Sleep(time.Millisecond)
	}
}

func testBatch(n int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte("v")}
	}
	return record.NewBatch(time.Now().UnixMilli(), recs)
}

func TestRaftLogSingleNode(t *testing.T) {
	h := startHost(t, 1, nil)
	l := openRaft(t, t.TempDir(), h, 1)
	defer l.Close()
	waitLeading(t, l)
	a, err := l.Append(testBatch(3), replica.AppendOptions{AckCommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Ack.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.BaseOffset != 0 || a.LastOffset != 2 || l.HighWatermark() != 3 {
		t.Fatalf("append at [%d, %d], high watermark %d", a.BaseOffset, a.LastOffset, l.HighWatermark())
	}
}

// hostedLog is a Raft log alone on its own host, which Close stops too.
type hostedLog struct {
	*replica.RaftLog
	host *raft.Host
}

func (l hostedLog) Close() error {
	err := l.RaftLog.Close()
	l.host.Close()
	return err
}

// TestRaftLogConformance runs the seam's conformance suite against a Raft
// log whose group has one member: the storage, the host's loop and its
// sync rounds, commits and leader changes (each reopen is a new term) are
// the ones every group uses; what more members add is the simulation's.
func TestRaftLogConformance(t *testing.T) {
	open := func(t *testing.T, dir string) replica.Log {
		cfg := replica.DefaultConfig()
		cfg.SegmentBytes = 1024 // several segments from little data
		h := startHost(t, 1, nil)
		l, err := replica.OpenRaft(dir, cfg, replica.RaftOptions{Host: h, Group: 7, Members: []uint64{1}, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		waitLeading(t, l)
		return hostedLog{RaftLog: l, host: h}
	}
	lead := func(t *testing.T, l replica.Log) replica.Log {
		dir := l.Dir()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return open(t, dir)
	}
	replicatest.RunReplicated(t, open, lead)
}

// cluster is a group of n members, one per host, over net.
func cluster(t *testing.T, n int, net *raft.MemNetwork) []*replica.RaftLog {
	t.Helper()
	var members []uint64
	for i := range n {
		members = append(members, uint64(i+1))
	}
	logs := make([]*replica.RaftLog, n)
	for i := range n {
		h := startHost(t, uint64(i+1), net)
		logs[i] = openRaft(t, t.TempDir(), h, members...)
		t.Cleanup(func() { logs[i].Close() })
	}
	return logs
}

// leaderOf waits for a member to lead and returns it.
func leaderOf(t *testing.T, logs []*replica.RaftLog) *replica.RaftLog {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range logs {
			if l.Group().Status().Leading() {
				return l
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no leader after 10s")
	return nil
}

func TestRaftLogReplicates(t *testing.T) {
	logs := cluster(t, 3, raft.NewMemNetwork())
	l := leaderOf(t, logs)
	var last replica.Appended
	for range 50 {
		a, err := l.Append(testBatch(2), replica.AppendOptions{AckCommitted: true})
		if err != nil {
			t.Fatal(err)
		}
		last = a
	}
	if err := last.Ack.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, f := range logs {
		for f.HighWatermark() != 100 {
			if time.Now().After(deadline) {
				t.Fatalf("a replica's high watermark is %d, want 100 (%+v)", f.HighWatermark(), f.Group().Status())
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestRaftLogAppendKeepsNoHoldOnItsInput: what a caller appends, then
// overwrites (a produce request's buffer, used again), is committed and
// written as it was appended.
func TestRaftLogAppendKeepsNoHoldOnItsInput(t *testing.T) {
	logs := cluster(t, 3, raft.NewMemNetwork())
	l := leaderOf(t, logs)
	want := testBatch(3)
	var acks []replica.Appended
	for range 20 {
		buf := slices.Clone(want)
		a, err := l.Append(buf, replica.AppendOptions{AckCommitted: true})
		if err != nil {
			t.Fatal(err)
		}
		clear(buf)
		acks = append(acks, a)
	}
	for _, a := range acks {
		if err := a.Ack.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range logs {
		waitHW(t, f, 60)
		vals := readValues(t, f)
		for _, v := range vals {
			if !strings.Contains(v, ":v@") {
				t.Fatalf("a replica holds %v, not the values appended", vals)
			}
		}
		if len(vals) != 60 {
			t.Fatalf("a replica holds %d records, want 60", len(vals))
		}
	}
}

// appendCommitted appends count batches of two records on the leader and
// waits for the last to be committed; it returns the end offset.
func appendCommitted(t testing.TB, l *replica.RaftLog, count int) int64 {
	t.Helper()
	end, err := tryAppendCommitted(l, count)
	if err != nil {
		t.Fatal(err)
	}
	return end
}

// tryAppendCommitted is appendCommitted returning what failed.
func tryAppendCommitted(l *replica.RaftLog, count int) (int64, error) {
	var last replica.Appended
	for range count {
		a, err := l.Append(testBatch(2), replica.AppendOptions{AckCommitted: true})
		if err != nil {
			return 0, err
		}
		last = a
	}
	if err := last.Ack.Wait(context.Background()); err != nil {
		return 0, err
	}
	return last.LastOffset + 1, nil
}

// waitHW waits for l's high watermark to reach hw.
func waitHW(t testing.TB, l *replica.RaftLog, hw int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.HighWatermark() < hw {
		if time.Now().After(deadline) {
			t.Fatalf("high watermark %d after 10s, want %d (%+v)", l.HighWatermark(), hw, l.Group().Status())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRaftLogSnapshotCatchUp: a follower that was away while its leader
// trimmed its index and deleted records catches up from a snapshot: from
// its own high watermark while the leader still has the records after it,
// from the leader's log start (emptying its log) once it does not.
func TestRaftLogSnapshotCatchUp(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		t.Run(map[bool]string{false: "Incremental", true: "AfterRetention"}[deleted], func(t *testing.T) {
			net := raft.NewMemNetwork()
			dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
			open := func(id int) (*raft.Host, *replica.RaftLog) {
				h := startHost(t, uint64(id), net)
				l, err := replica.OpenRaft(dirs[id-1], replica.DefaultConfig(), replica.RaftOptions{
					Host: h, Group: 7, Members: []uint64{1, 2, 3}, Window: 4, Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return h, l
			}
			_, l1 := open(1)
			_, l2 := open(2)
			h3, l3 := open(3)
			leader := leaderOf(t, []*replica.RaftLog{l1, l2, l3})
			if leader == l3 {
				l3.Group().TransferLeadership(1)
				leader = leaderOf(t, []*replica.RaftLog{l1, l2})
			}
			end := appendCommitted(t, leader, 20)
			waitHW(t, l3, end)
			l3.Close()
			h3.Close()
			net.Unregister(3)

			end = appendCommitted(t, leader, 40)
			if deleted {
				for _, l := range []*replica.RaftLog{l1, l2} {
					waitHW(t, l, end)
					if _, err := l.DeleteBefore(end - 10); err != nil {
						t.Fatal(err)
					}
				}
			}
			_, l3 = open(3)
			waitHW(t, l3, end)
			wantStart := int64(0)
			if deleted {
				wantStart = end - 10
			}
			if l3.StartOffset() > wantStart {
				t.Fatalf("the caught-up follower starts at %d, want at most %d", l3.StartOffset(), wantStart)
			}
			end = appendCommitted(t, leader, 5)
			waitHW(t, l3, end)
		})
	}
}

// TestRaftLogMinorityLeader: a leader cut off with a minority keeps
// taking appends it cannot commit; their commits fail once it learns of
// the new leader (never succeed), and the records are gone from every
// replica, replaced by the majority's.
func TestRaftLogMinorityLeader(t *testing.T) {
	net := raft.NewMemNetwork()
	logs := cluster(t, 3, net)
	old := leaderOf(t, logs)
	appendCommitted(t, old, 5)
	var oldID uint64
	for i, l := range logs {
		if l == old {
			oldID = uint64(i + 1)
		}
	}
	isolate := func(cut bool) {
		for id := uint64(1); id <= 3; id++ {
			if id != oldID {
				net.Cut(oldID, id, cut)
				net.Cut(id, oldID, cut)
			}
		}
	}
	isolate(true)
	var pending []replica.Appended
	for range 5 {
		a, err := old.Append(testBatch(1), replica.AppendOptions{AckCommitted: true})
		if err != nil {
			break // it may already have stepped down
		}
		pending = append(pending, a)
	}
	var rest []*replica.RaftLog
	for _, l := range logs {
		if l != old {
			rest = append(rest, l)
		}
	}
	leader := leaderOf(t, rest)
	end := appendCommitted(t, leader, 7)
	for _, a := range pending {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := a.Ack.Wait(ctx)
		cancel()
		if err == nil {
			t.Fatalf("an append on a leader cut off with a minority was acknowledged at %d", a.BaseOffset)
		}
	}
	isolate(false)
	waitHW(t, old, end)
	for _, a := range pending {
		if err := a.Ack.Wait(context.Background()); err == nil {
			t.Fatalf("the minority leader's append at %d was acknowledged after the partition healed", a.BaseOffset)
		} else if !errors.Is(err, replica.ErrNotLeader) && !errors.Is(err, replica.ErrTruncated) {
			t.Fatalf("the minority leader's append: %v, want ErrNotLeader or ErrTruncated", err)
		}
	}
	for _, l := range logs {
		if got, want := readValues(t, l), readValues(t, leader); !slices.Equal(got, want) {
			t.Fatalf("a replica holds %q, the leader %q", got, want)
		}
	}
}

// readValues reads the committed values of a log.
func readValues(t *testing.T, l *replica.RaftLog) []string {
	t.Helper()
	var out []string
	for next := l.StartOffset(); next < l.HighWatermark(); {
		s, err := l.Read(next, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Bytes()
		s.Release()
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, err := record.Verify(b)
			if err != nil {
				t.Fatal(err)
			}
			recs, _ := record.Records(b[:h.Size()])
			for _, r := range recs {
				out = append(out, fmt.Sprintf("%d:%s@%d", h.BaseOffset, r.Value, h.PartitionLeaderEpoch))
			}
			next = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return out
}

// TestRaftQuiescence: idle groups stop ticking on every node; an append
// wakes its group; a leader's node going silent wakes the groups it led,
// and they elect another leader.
func TestRaftQuiescence(t *testing.T) {
	const groups = 20
	net := raft.NewMemNetwork()
	var hosts []*raft.Host
	logs := make([][]*replica.RaftLog, groups)
	for id := uint64(1); id <= 3; id++ {
		h := startHost(t, id, net)
		hosts = append(hosts, h)
		for g := range groups {
			l, err := replica.OpenRaft(t.TempDir(), replica.DefaultConfig(), replica.RaftOptions{
				Host: h, Group: uint64(g + 1), Members: []uint64{1, 2, 3}, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			logs[g] = append(logs[g], l)
		}
	}
	allQuiesced := func(g int) bool {
		for _, l := range logs[g] {
			if !l.Group().Quiesced() {
				return false
			}
		}
		return true
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for g := range groups {
		waitFor(fmt.Sprintf("group %d to quiesce", g+1), func() bool { return allQuiesced(g) })
	}

	l := leaderOf(t, logs[0])
	a, err := l.Append(testBatch(1), replica.AppendOptions{AckCommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Ack.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor("group 1 to quiesce again", func() bool { return allQuiesced(0) })

	// Silence the node leading group 2: the others wake the groups it
	// led and elect new leaders, although no heartbeat was missed.
	var leaderID uint64
	for i, l := range logs[1] {
		if l.Group().Status().Leading() {
			leaderID = uint64(i + 1)
		}
	}
	for id := uint64(1); id <= 3; id++ {
		net.Cut(leaderID, id, true)
		net.Cut(id, leaderID, true)
	}
	waitFor("a new leader of group 2", func() bool {
		for i, l := range logs[1] {
			if uint64(i+1) != leaderID && l.Group().Status().Leading() {
				return true
			}
		}
		return false
	})
}

// TestRaftLogProposeForwards: Propose on a follower forwards the batch to
// the leader and returns once it is committed, with its offset; the
// leader's InContact loses a member whose node went silent.
func TestRaftLogProposeForwards(t *testing.T) {
	net := raft.NewMemNetwork()
	logs := cluster(t, 3, net)
	leader := leaderOf(t, logs)
	var follower *replica.RaftLog
	for _, l := range logs {
		if l != leader {
			follower = l
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offset, err := follower.Propose(ctx, testBatch(3))
	if err != nil {
		t.Fatal(err)
	}
	if hw := leader.HighWatermark(); hw < offset+3 {
		t.Fatalf("proposed at %d from a follower; the leader's high watermark is %d", offset, hw)
	}
	if err := follower.WaitHighWatermark(ctx, offset+2); err != nil {
		t.Fatal(err)
	}
	if got := leader.InContact(); len(got) != 3 {
		t.Fatalf("in contact: %v, want all three", got)
	}
	var silent uint64
	for i, l := range logs {
		if l == follower {
			silent = uint64(i + 1)
		}
	}
	for id := uint64(1); id <= 3; id++ {
		net.Cut(silent, id, true)
		net.Cut(id, silent, true)
	}
	deadline := time.Now().Add(10 * time.Second)
	for slices.Contains(leader.InContact(), silent) {
		if time.Now().After(deadline) {
			t.Fatalf("node %d cut off is still in contact: %v", silent, leader.InContact())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRaftLeaderStuckLoop: a leader whose host loop stops (a long step, a
// SIGSTOP) stops saying it leads within LivenessTicks, before its peers,
// which take it for down only then, may elect another: the Kafka front
// end then answers NOT_LEADER_OR_FOLLOWER and no leader in metadata,
// rather than its stale high watermark. Once its loop ticks again it
// leads again (here nobody else was elected).
func TestRaftLeaderStuckLoop(t *testing.T) {
	h, err := raft.NewHost(raft.Config{NodeID: 1, TickInterval: 10 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	l := openRaft(t, t.TempDir(), h, 1)
	t.Cleanup(func() { l.Close() })
	step := func() { // a tick and the work it makes, as Start's loop does
		h.Tick()
		for b := h.Process(); b != nil; b = h.Process() {
			b.Run(1)
			h.Synced(b)
		}
	}
	for range 1000 {
		if l.Group().Status().Leading() {
			break
		}
		step()
	}
	if leader, _, leading := l.Leadership(); !leading || leader != 1 {
		t.Fatalf("no leader after 1,000 ticks: %+v", l.Group().Status())
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, _, leading := l.Leadership(); leading; _, _, leading = l.Leadership() {
		if time.Now().After(deadline) {
			t.Fatal("still leading 10 s after its loop stopped ticking")
		}
		time.Sleep(time.Millisecond)
	}
	if leader, _, _ := l.Leadership(); leader != 0 {
		t.Fatalf("a leader whose loop is stuck names itself leader %d", leader)
	}
	if _, err := l.Append(testBatch(1), replica.AppendOptions{}); !errors.Is(err, replica.ErrNotLeader) {
		t.Fatalf("append on a leader whose loop is stuck: %v, want ErrNotLeader", err)
	}
	step()
	if _, _, leading := l.Leadership(); !leading {
		t.Fatalf("not leading once its loop ticks again: %+v", l.Group().Status())
	}
}

// TestRaftLogProposeAfterLeaderDies: a follower proposes right after its
// leader is cut off from everyone (as if killed -9), before it knows:
// the forward to the dead leader, which never answers, is given up once
// an election starts, and the batch is committed by the new leader long
// before the proposal's own deadline.
func TestRaftLogProposeAfterLeaderDies(t *testing.T) {
	net := raft.NewMemNetwork()
	logs := cluster(t, 3, net)
	dead := leaderOf(t, logs)
	deadID, _, _ := dead.Leadership()
	for id := uint64(1); id <= 3; id++ {
		net.Cut(deadID, id, true)
		net.Cut(id, deadID, true)
	}
	follower := logs[deadID%3] // another node, which still takes deadID for the leader
	if leader, _, _ := follower.Leadership(); leader != deadID {
		t.Fatalf("the follower knows leader %d, not %d, before the election", leader, deadID)
	}
	const deadline = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	offset, err := follower.Propose(ctx, testBatch(3))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("propose after the leader died: %v after %v", err, took)
	}
	if took > deadline/2 {
		t.Fatalf("propose after the leader died took %v: it waited on the dead leader", took)
	}
	if err := follower.WaitHighWatermark(ctx, offset+2); err != nil {
		t.Fatal(err)
	}
	t.Logf("committed %v after the leader was cut off", took.Round(time.Millisecond))
}

// TestRaftLogProposeRefusedAtOnce: the leader's refusal of a forwarded
// proposal for any reason but leadership (here its handler's) is
// returned at once, not tried again until the proposal's deadline; a
// refusal because the node asked does not lead is tried again.
func TestRaftLogProposeRefusedAtOnce(t *testing.T) {
	logs := cluster(t, 3, raft.NewMemNetwork())
	leader := leaderOf(t, logs)
	follower := logs[0]
	if follower == leader {
		follower = logs[1]
	}
	var refusals atomic.Int32
	leader.SetForwardHandler(func(ctx context.Context, data []byte) (int64, error) {
		if refusals.Add(1) == 1 {
			return -1, &replica.NotLeaderError{} // retried
		}
		return -1, errors.New("refused for the test")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := follower.Propose(ctx, testBatch(1))
	if !errors.Is(err, raft.ErrForwarded) || !strings.Contains(err.Error(), "refused for the test") || ctx.Err() != nil {
		t.Fatalf("a refused proposal: %v after %v, want the leader's refusal at once", err, time.Since(start))
	}
	if n := refusals.Load(); n != 2 {
		t.Fatalf("the leader was asked %d times, want twice (not the leader, then refused)", n)
	}
}

// TestRaftLogWritesItsRecoveryPoint: a Raft replica's sync rounds leave
// the log's recovery point to after their acknowledgements
// (raft.Replica.AfterSync), and it is written there.
func TestRaftLogWritesItsRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	h := startHost(t, 1, nil)
	l := openRaft(t, dir, h, 1)
	defer l.Close()
	waitLeading(t, l)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A loop stalled a few ticks on a busy machine shows no leader
		// for a moment: that append is tried again.
		end, err := tryAppendCommitted(l, 1)
		if err != nil && !errors.Is(err, replica.ErrNotLeader) {
			t.Fatal(err)
		}
		b, rerr := os.ReadFile(filepath.Join(dir, "log", "recovery-point"))
		if rerr == nil && strings.TrimSpace(string(b)) != "0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery point written in 10s of commits (up to %d: %v): %q %v", end, err, b, rerr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
