package mq

import (
	"context"
	"strings"
	"testing"
	"time"

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

// TestQuorumForwardRememberedAcrossAStop: a leader stopped for minutes
// (SIGSTOP) that finds a repeat of a forward it took in its socket
// buffers when it resumes does not take it again: its memory of the
// forwards ages on the time it ran, not the time that passed. A forward
// older than forwardMemory of running time is forgotten.
func TestQuorumForwardRememberedAcrossAStop(t *testing.T) {
	var f forwards
	start := time.Now()
	if _, first := f.begin(1, start); !first {
		t.Fatal("a new forward not taken")
	}
	now := start.Add(5 * time.Minute)
	if _, first := f.begin(1, now); first {
		t.Fatal("a repeat read after a 5-minute stop taken again")
	}
	for range forwardMemory/time.Second + 1 { // running, a forward a second
		now = now.Add(time.Second)
		f.begin(2, now)
	}
	if _, first := f.begin(1, now); !first {
		t.Fatalf("a forward %v old in running time still remembered", forwardMemory+time.Second)
	}
}
