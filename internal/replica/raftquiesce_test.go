package replica_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// TestQuiescedLeaderCutOffStepsDown: an idle group quiesces; then its
// leader and one follower are cut off from the other three of five nodes.
// The majority elects a leader of its own, and the old leader, woken when
// its peers fall silent, must step down (CheckQuorum) rather than quiesce
// again and go on saying it leads: the followers in contact with it would
// believe it, and a node's view of who is down is trusted only while it is
// in contact with the leader of the metadata group (the Kafka front end
// then leaves the majority's brokers out of Metadata, and clients such as
// sarama keep asking the minority for leaders it cannot know).
func TestQuiescedLeaderCutOffStepsDown(t *testing.T) {
	s := newSim(t, 7, 5, filepath.Join(simBaseDir(t), "quiesce"), installSimHooks(t))
	s.dropRate, s.dupRate, s.maxDelay = 0, 0, 0
	const g = 1
	s.waitFor(t, "a quiesced leader of group 1", 400, func() bool {
		for _, n := range s.nodes {
			if l := n.logs[g]; l.Group().Status().Leading() {
				return l.Group().Quiesced()
			}
		}
		return false
	})
	var old *simNode
	for _, n := range s.nodes {
		if n.logs[g].Group().Status().Leading() {
			old = n
		}
	}
	companion := s.nodes[0]
	if companion == old {
		companion = s.nodes[1]
	}
	minority := map[uint64]bool{old.id: true, companion.id: true}
	for _, a := range s.nodes {
		for _, b := range s.nodes {
			if minority[a.id] != minority[b.id] {
				s.net.Cut(a.id, b.id, true)
			}
		}
	}
	// Liveness (a few ticks) plus an election timeout (ten ticks) and a
	// randomized one more, for the leader to step down and then for its
	// companion to stop following it: well within 80 ticks.
	s.waitFor(t, fmt.Sprintf("node %d, cut off with node %d, to stop leading, node %d to stop following it, and a majority leader",
		old.id, companion.id, companion.id), 80, func() bool {
		if old.logs[g].Group().Status().Leading() || companion.logs[g].Group().Status().Leader == old.id {
			return false
		}
		for _, n := range s.nodes {
			if !minority[n.id] && n.logs[g].Group().Status().Leading() {
				return true
			}
		}
		return false
	})
}

// waitFor advances the simulation up to ticks ticks until cond holds, and
// fails the test if it never does.
func (s *sim) waitFor(t *testing.T, what string, ticks int, cond func() bool) {
	t.Helper()
	for range ticks * stepsPerTick {
		s.advance()
		if cond() {
			return
		}
	}
	t.Fatalf("after %d ticks, still waiting for %s", ticks, what)
}

// TestRestartedFollowerOfAQuiescedGroupCatchesUp: a follower restarted
// while its group is quiesced knows only the commit index it saved at its
// last change of term (the commit is a hint in the state file), and a
// quiesced leader sends nothing. The leader's host sees the follower's
// host ping under a new incarnation and wakes the group, whose heartbeat
// tells the follower the commit index within a tick or two. Without that,
// a voter learns it only after campaigning (an election timeout), and a
// learner, which never campaigns, not at all: a node restarted with
// --join waited forever for its metadata replica to catch up.
func TestRestartedFollowerOfAQuiescedGroupCatchesUp(t *testing.T) {
	s := newSim(t, 11, 3, filepath.Join(simBaseDir(t), "restart"), installSimHooks(t))
	s.dropRate, s.dupRate, s.maxDelay = 0, 0, 0
	const g = 1
	leader := func() *simNode {
		for _, n := range s.nodes {
			if n.logs[g].Group().Status().Leading() {
				return n
			}
		}
		return nil
	}
	s.waitFor(t, "a leader of group 1", 400, func() bool { return leader() != nil })
	lead := leader()
	for i := range 20 {
		batch := record.NewBatch(int64(s.step), []record.Record{{Value: fmt.Appendf(nil, "r%d", i)}})
		if _, err := lead.logs[g].Append(batch, replica.AppendOptions{AckCommitted: true}); err != nil {
			t.Fatal(err)
		}
		s.advance()
	}
	s.waitFor(t, "group 1 quiesced with every record committed", 100, func() bool {
		return lead.logs[g].Group().Quiesced() && lead.logs[g].HighWatermark() == 20
	})
	follower := s.nodes[0]
	if follower == lead {
		follower = s.nodes[1]
	}
	s.stop(follower)
	s.start(follower)
	if hw := follower.logs[g].HighWatermark(); hw == 20 {
		t.Fatalf("the restarted follower knows the commit index already (high watermark %d): the test shows nothing", hw)
	}
	// Well under an election timeout (10 ticks), after which a voter
	// would have campaigned and woken the group anyway.
	s.waitFor(t, "the restarted follower to learn the commit index", 4, func() bool {
		return follower.logs[g].HighWatermark() == 20
	})
}
