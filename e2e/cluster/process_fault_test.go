package cluster

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The fault tests on loopback processes: franz-go, sarama and kafka-go
// write to every partition of an RF3 (or RF5) topic with acks=all while a
// node is stopped, restarted or killed; the checker then requires lost =
// duplicated = unexpected = reordered = 0 on every partition.
// -cluster.cycles repeats each fault.

// faultContext bounds one fault test: two minutes, and one more per
// extra cycle.
func faultContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+*faultCycles)*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestLeaderStoppedFault: the leader of partition 0 is stopped with
// SIGSTOP for three election timeouts, then resumed. While it is stopped
// the other two elect a new leader and every client re-routes to it; a
// Produce request sent straight to the stopped leader (read once it
// resumes, deposed) must be refused NOT_LEADER_OR_FOLLOWER.
func TestLeaderStoppedFault(t *testing.T) {
	requireFaultRun(t)
	ctx := faultContext(t)
	ft := newFaultTest(ctx, t, startCluster(t, 3), "stopped", 3, 3)
	direct := newDirectClient(t, ft.seeds())
	topicID := ft.topicID()
	pinned := ft.ledger.openProbe("pinned", 0)
	ft.run(1, func() {
		old := ft.leaderOf(nil, 0, -1)
		led := ft.waitView([]*node{old}, "the stopped leader's epoch", func(map[int32]partitionView) bool { return true })[0].epoch
		// Open the client's produce connection to it first (to a
		// partition that does not exist: nothing is written), so the
		// request below is in its socket when it resumes.
		if _, err := produceTo(ctx, direct, int32(old.id), ft.topic, topicID, ft.partitions, nil); err != nil {
			t.Fatalf("connect to node %d: %v", old.id, err)
		}
		// Once every thread is stopped: a node still running when the
		// request arrives may replicate it to a follower first, and the
		// new leader then rightly commits it.
		old.pause()
		stoppedAt := time.Now()
		seq, v := ft.ledger.next(pinned)
		answer := make(chan error, 1)
		go func() {
			code, err := produceTo(ctx, direct, int32(old.id), ft.topic, topicID, 0, v)
			if err == nil && code == nil {
				ft.ledger.ack(pinned, seq)
			}
			answer <- firstErr(err, code)
		}()
		elected := ft.leaderOf(ft.others(old), 0, int32(old.id))
		t.Logf("node %d (leader of %s-0, epoch %d) stopped; node %d elected after %v", old.id, ft.topic, led, elected.id, time.Since(stoppedAt).Round(time.Millisecond))
		ft.progress(50, "while the old leader is stopped")
		select { // the fault itself: stopped for three election timeouts
		case <-time.After(time.Until(stoppedAt.Add(3 * electionTimeout))):
		case <-ctx.Done():
		}
		old.signal(syscall.SIGCONT)
		select {
		case err := <-answer:
			if err == nil {
				offset, epoch := ft.find(0, v)
				t.Errorf("node %d acknowledged a Produce it read after it was deposed: offset %d, leader epoch %d", old.id, offset, epoch)
			} else if !errors.Is(err, kerr.NotLeaderForPartition) {
				t.Errorf("node %d answered a Produce it read after it was deposed with %v, not NOT_LEADER_OR_FOLLOWER", old.id, err)
			}
			t.Logf("Produce sent to the stopped leader, answered after it resumed: %v", err)
		case <-ctx.Done():
			t.Fatal("no answer from the resumed leader")
		}
		ft.waitHealthy("the old leader resumed")
		ft.progress(50, "after the old leader resumed")
	})
}

// TestRollingRestartFault: every node in turn is stopped with SIGTERM and
// started again under load, the next one only once every partition has
// all its replicas in sync again.
func TestRollingRestartFault(t *testing.T) {
	requireFaultRun(t)
	ctx := faultContext(t)
	ft := newFaultTest(ctx, t, startCluster(t, 3), "rolling", 3, 3)
	ft.run(len(ft.nodes), func() {
		for _, nd := range ft.nodes {
			nd.terminate()
			nd.start()
			nd.waitReady()
			ft.waitHealthy("a restart")
			ft.progress(50, "after a restart")
		}
	})
}

// TestFollowerKilledFault: a follower of partition 0 is killed with
// SIGKILL. The partition keeps taking acks=all writes on its two other
// replicas, the leader drops the dead one from the in-sync replicas, and
// the restarted follower catches up.
func TestFollowerKilledFault(t *testing.T) {
	requireFaultRun(t)
	ctx := faultContext(t)
	ft := newFaultTest(ctx, t, startCluster(t, 3), "follower", 3, 3)
	ft.run(1, func() {
		leader := ft.leaderOf(nil, 0, -1)
		follower := ft.others(leader)[0]
		follower.kill()
		t.Logf("killed node %d, a follower of %s-0 (led by node %d)", follower.id, ft.topic, leader.id)
		ft.waitView([]*node{leader}, "the killed follower out of the in-sync replicas", func(v map[int32]partitionView) bool {
			return v[0].leader == int32(leader.id) && len(v[0].isr) == ft.rf-1
		})
		ft.progress(100, "with a follower down")
		follower.start()
		follower.waitReady()
		ft.waitHealthy("the follower restarted")
		ft.progress(50, "after the follower restarted")
	})
}

// TestTwoOfFiveKilledFault: five nodes, an RF5 topic; the leader of
// partition 0 and another node are killed with SIGKILL at once. Three
// of five remain a majority of every group: the load goes on, and both
// nodes catch up when restarted.
func TestTwoOfFiveKilledFault(t *testing.T) {
	requireFaultRun(t)
	ctx := faultContext(t)
	ft := newFaultTest(ctx, t, startCluster(t, 5), "five", 3, 5)
	ft.run(2, func() {
		leader := ft.leaderOf(nil, 0, -1)
		victims := []*node{leader, ft.others(leader)[0]}
		for _, nd := range victims {
			nd.kill()
		}
		ft.leaderOf(ft.others(victims...), 0, int32(leader.id))
		ft.progress(100, "with two of five nodes down")
		for _, nd := range victims {
			nd.start()
		}
		for _, nd := range victims {
			nd.waitReady()
		}
		ft.waitHealthy("two nodes restarted")
		ft.progress(50, "after two nodes restarted")
	})
}

// find reads partition p for the record of value and returns its offset
// and leader epoch (-1, -1 if it is not there).
func (ft *faultTest) find(p int32, value []byte) (offset int64, epoch int32) {
	ft.t.Helper()
	offset, epoch = -1, -1
	end := endOffsets(ft.ctx, ft.t, ft.seeds(), ft.topic, ft.partitions)[p]
	readPartition(ft.ctx, ft.t, ft.seeds(), ft.topic, p, end, func(r *kgo.Record) {
		if string(r.Value) == string(value) {
			offset, epoch = r.Offset, r.LeaderEpoch
		}
	})
	return offset, epoch
}

// newDirectClient is a client for requests sent to one broker by id.
func newDirectClient(t *testing.T, seeds []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestTimeoutOverhead(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// topicID is the topic's id, for Produce v13.
func (ft *faultTest) topicID() [16]byte {
	ft.t.Helper()
	md, err := ft.admin.Metadata(ft.ctx, ft.topic)
	if err != nil {
		ft.t.Fatal(err)
	}
	return md.Topics[ft.topic].ID
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
