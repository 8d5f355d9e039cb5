package mq

import (
	"context"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/raft"
)

// TestQuorumForwardFailedInEarlierTermTakenOnItsRepeat: a leader whose
// attempt of a forward fails (it is cut off after the forward's first
// message is committed, and steps down) and that leads again later takes
// a repeat of the forward, for what the log lacks: its earlier term's
// failure is not the forward's outcome in this term. One copy of each
// message, and no nack.
func TestQuorumForwardFailedInEarlierTermTakenOnItsRepeat(t *testing.T) {
	net := raft.NewMemNetwork()
	// big fills a batch by itself (maxBatchBytes): its entry is the
	// forward's first, whatever the store's flushes do.
	big := "big|" + strings.Repeat("x", 1<<20)
	cut := &cutAfterEntry{marker: []byte("big|"), passed: map[uint64]bool{}}
	envs := newQuorumEnvsWrapped(t, 3, net, cut.wrap)
	l, _, _ := quorumRoles(t, envs, "q", 3)
	a := envs[l]
	var batches []byte
	for _, body := range []string{big, "small"} {
		batches = append(batches, newStoredMessage(persistent("", "q", body), nil, 1).encoded()...)
	}
	req := &remoteRequest{Op: opPublish, Queue: a.queueNamed("q").id, Batches: batches, Forward: 42}
	cut.arm(uint64(l + 1))
	if r := a.queueNamed("q").quorum.Load().serve(context.Background(), req); r.Error == "" {
		t.Fatal("the cut-off leader's attempt succeeded: the test needs it to fail")
	}
	others := append(append([]*env{}, envs[:l]...), envs[l+1:]...)
	servingNode(t, others, "q") // the big message's entry committed by the new leader
	cut.arm(0)
	eventually(t, "the first leader leads again", func() bool {
		if at := servingNow(envs, "q"); at >= 0 && at != l {
			envs[at].queueNamed("q").quorum.Load().group.TransferLeadership(uint64(l + 1))
		}
		_, err := a.v.accessQueue("q", 0)
		return err == nil
	})
	if r := a.queueNamed("q").quorum.Load().serve(context.Background(), req); r.Error != "" {
		t.Fatalf("the repeat answered %q, want taken", r.Error)
	}
	var got []string
	for _, body := range a.drain("q") {
		got = append(got, body[:min(len(body), 5)])
	}
	if len(got) != 2 || got[0] != "big|x" || got[1] != "small" {
		t.Fatalf("the queue holds %q, want one big message and one small", got)
	}
}
