package raft_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
)

// TestLateForwardCopyNotTakenAgain: a copy of a forward held up on its
// way (a duplicate in the network, a resend that waited in a queue while
// there was no connection) and delivered after the leader forgot the
// forward it took is not taken again: it expired on its way, and the
// leader refuses it. A copy that arrives as late while the leader still
// remembers the forward is answered with the first answer.
func TestLateForwardCopyNotTakenAgain(t *testing.T) {
	tap := &forwardTap{}
	c, lead, from := newForwardingCluster(t, func(_ uint64, tr raft.Transport) raft.Transport {
		return tapTransport{Transport: tr, tap: tap}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		offset, err := c.nodes[from].host.Forward(ctx, reqGroup, lead, record.NewBatch(0, []record.Record{{Value: []byte("once")}}))
		if err == nil && offset != 0 {
			t.Errorf("the forward got offset %d, want 0", offset)
		}
		res <- err
	}()
	var err error
	c.waitStepping(t, "the forward's answer", func() bool { return received(res, &err) })
	if err != nil {
		t.Fatal(err)
	}
	leader := c.nodes[lead].host
	held := tap.forward()
	deliverLate := func(late time.Duration) raft.Envelope {
		t.Helper()
		e := held
		e.Expires = e.Expires.Add(-late) // its time on the way counts against it, as a transport counts it
		answers := len(tap.replies())
		leader.Deliver(from, []raft.Envelope{e})
		c.waitStepping(t, "the leader's answer to the late copy", func() bool { return len(tap.replies()) > answers })
		return tap.replies()[answers]
	}

	if r := deliverLate(time.Hour); r.Offset != 0 {
		t.Fatalf("a late copy of a forward the leader remembers answered offset %d (%s), want the first answer, 0", r.Offset, r.Data)
	}
	leader.AgeForwardMemory(time.Hour) // it forgets the forward
	if r := deliverLate(time.Hour); r.Offset != -1 {
		t.Fatalf("a late copy of a forward the leader forgot answered offset %d, want a refusal", r.Offset)
	}
	c.ticks(5) // a second append, were there one, is committed by then
	if hw := c.nodes[lead].logs[reqGroup].HighWatermark(); hw != 1 {
		t.Fatalf("the leader's high watermark is %d after one forwarded record and a late copy, want 1", hw)
	}
}

// TestLateCallNotHandled: a call that arrives expired (its caller gave
// up; the handler may have forgotten an earlier copy) is refused, not
// handed to the group's call handler; one with time left is.
func TestLateCallNotHandled(t *testing.T) {
	tap := &forwardTap{}
	c := newWrappedMemCluster(t, 3, func(_ uint64, tr raft.Transport) raft.Transport {
		return tapTransport{Transport: tr, tap: tap}
	})
	c.open(c.ids, reqGroup)
	var mu sync.Mutex
	var handled []string
	c.nodes[2].logs[reqGroup].SetCallHandler(func(_ context.Context, _ uint64, data []byte) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, string(data))
		return []byte("answer"), nil
	})
	for _, e := range []raft.Envelope{
		{Kind: raft.KindCall, Group: reqGroup, Index: 1, Data: []byte("late"), Expires: time.Now().Add(-time.Millisecond)},
		{Kind: raft.KindCall, Group: reqGroup, Index: 2, Data: []byte("on time"), Expires: time.Now().Add(time.Minute)},
	} {
		answers := len(tap.replies())
		c.nodes[2].host.Deliver(1, []raft.Envelope{e})
		c.waitStepping(t, "node 2's answer to the call", func() bool { return len(tap.replies()) > answers })
		want := int64(0) // a call's answer
		if string(e.Data) == "late" {
			want = -1 // a refusal
		}
		if r := tap.replies()[answers]; r.Offset != want {
			t.Fatalf("the call %q answered offset %d (%s), want %d", e.Data, r.Offset, r.Data, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(handled, []string{"on time"}) {
		t.Fatalf("the handler took %q, want only the call on time", handled)
	}
}

// newForwardingCluster is three nodes sending through wrap, with group
// reqGroup open, led by lead; from is a follower.
func newForwardingCluster(t *testing.T, wrap func(id uint64, tr raft.Transport) raft.Transport) (c *memCluster, lead, from uint64) {
	t.Helper()
	c = newWrappedMemCluster(t, 3, wrap)
	c.open(c.ids, reqGroup)
	lead = c.waitLeader(t, reqGroup, 200)
	from = c.ids[0]
	if from == lead {
		from = c.ids[1]
	}
	return c, lead, from
}

// forwardTap keeps the first forward sent, and the replies to forwards
// and calls.
type forwardTap struct {
	mu    sync.Mutex
	first *raft.Envelope
	sent  []raft.Envelope // replies
}

func (f *forwardTap) see(envs []raft.Envelope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range envs {
		switch {
		case e.Kind == raft.KindForward && f.first == nil:
			f.first = &e
		case e.Kind == raft.KindForwardReply || e.Kind == raft.KindCallReply:
			f.sent = append(f.sent, e)
		}
	}
}

func (f *forwardTap) forward() raft.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.first
}

func (f *forwardTap) replies() []raft.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// tapTransport sends what its Transport sends, and shows it to tap.
type tapTransport struct {
	raft.Transport
	tap *forwardTap
}

func (t tapTransport) Send(to uint64, envs []raft.Envelope) {
	t.tap.see(envs)
	t.Transport.Send(to, envs)
}
