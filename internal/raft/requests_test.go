package raft_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
)

// Calls and forwards to a node that dies, or whose connection breaks,
// while they wait for its answer (forward.go).

// TestCallFailsWhenItsConnectionBreaks: a call waiting on a node whose
// handler has not answered fails with ErrUnreachable as soon as the
// connection to that node breaks, not when its caller's context ends; a
// new call fails at once while there is no connection (the node is
// unreachable, though still up for Raft), and is answered as usual once
// there is one again.
func TestCallFailsWhenItsConnectionBreaks(t *testing.T) {
	c := newLedCluster(t)
	called := make(chan struct{}, 1)
	c.nodes[2].logs[reqGroup].SetCallHandler(func(ctx context.Context, _ uint64, _ []byte) ([]byte, error) {
		called <- struct{}{}
		<-ctx.Done() // answers only once its host closes
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := c.nodes[1].host.Call(ctx, reqGroup, 2, []byte("question"))
		res <- err
	}()
	c.waitStepping(t, "node 2 to take the call", func() bool { return len(called) > 0 })

	c.net.Disconnect(1, 2)
	var err error
	c.waitStepping(t, "the call to fail once its connection broke", func() bool { return received(res, &err) })
	if !errors.Is(err, raft.ErrUnreachable) {
		t.Fatalf("a call whose connection broke: %v, want ErrUnreachable", err)
	}
	if _, err := c.nodes[1].host.Call(ctx, reqGroup, 2, []byte("question")); !errors.Is(err, raft.ErrUnreachable) {
		t.Fatalf("a call to a node with no connection: %v, want ErrUnreachable at once", err)
	}
	if h := c.nodes[1].host; h.Reachable(2) || !h.PeerUp(2) {
		t.Fatalf("node 2 without a connection: reachable %v, up %v; want unreachable, up", h.Reachable(2), h.PeerUp(2))
	}

	c.net.Connect(1, 2)
	if !c.nodes[1].host.Reachable(2) {
		t.Fatal("node 2 unreachable once connected again")
	}

	c.nodes[2].logs[reqGroup].SetCallHandler(func(context.Context, uint64, []byte) ([]byte, error) { return []byte("answer"), nil })
	go func() {
		out, err := c.nodes[1].host.Call(ctx, reqGroup, 2, []byte("question"))
		if err == nil && string(out) != "answer" {
			err = fmt.Errorf("answered %q", out)
		}
		res <- err
	}()
	c.waitStepping(t, "the next call's answer", func() bool { return received(res, &err) })
	if err != nil {
		t.Fatalf("a call after the connection broke: %v", err)
	}
}

// TestRequestsToANodeTakenForDownFail: a call and a forward waiting on a
// node that falls silent (cut off, no connection breaks) fail with
// ErrUnreachable once the host takes it for down.
func TestRequestsToANodeTakenForDownFail(t *testing.T) {
	c := newLedCluster(t)
	taken := make(chan struct{}, 2)
	hold := func(ctx context.Context) { // answers only once its host closes
		taken <- struct{}{}
		<-ctx.Done()
	}
	c.nodes[3].logs[reqGroup].SetCallHandler(func(ctx context.Context, _ uint64, _ []byte) ([]byte, error) {
		hold(ctx)
		return nil, ctx.Err()
	})
	c.nodes[3].logs[reqGroup].SetForwardHandler(func(ctx context.Context, _ []byte) (int64, error) {
		hold(ctx)
		return -1, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := c.nodes[1].host
	res := make(chan error, 2)
	go func() {
		_, err := h.Call(ctx, reqGroup, 3, []byte("question"))
		res <- err
	}()
	go func() {
		_, err := h.Forward(ctx, reqGroup, 3, record.NewBatch(0, []record.Record{{Value: []byte("proposal")}}))
		res <- err
	}()
	c.waitStepping(t, "node 3 to take the call and the forward", func() bool { return len(taken) == 2 })

	c.net.Cut(3, 1, true)
	c.net.Cut(1, 3, true)
	var errs []error
	c.waitStepping(t, "the call and the forward to fail", func() bool {
		var err error
		if received(res, &err) {
			errs = append(errs, err)
		}
		return len(errs) == 2
	})
	if h.PeerUp(3) {
		t.Fatal("the requests failed before node 1 took node 3 for down")
	}
	for _, err := range errs {
		if !errors.Is(err, raft.ErrUnreachable) {
			t.Fatalf("a request waiting on a node taken for down: %v, want ErrUnreachable", err)
		}
	}
}

// TestForwardSentAgainIsTakenOnce: a forward whose request, or whose
// answer, is lost with a connection that breaks is sent again under its
// request id at once, and the leader appends it once: the follower gets
// the offset of the one append.
func TestForwardSentAgainIsTakenOnce(t *testing.T) {
	for _, lost := range []raft.Kind{raft.KindForward, raft.KindForwardReply} {
		t.Run(lost.String(), func(t *testing.T) {
			drop := &dropFirst{kind: lost}
			c, lead, from := newForwardingCluster(t, func(_ uint64, tr raft.Transport) raft.Transport {
				return dropTransport{Transport: tr, drop: drop}
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			type result struct {
				offset int64
				err    error
			}
			res := make(chan result, 1)
			go func() {
				offset, err := c.nodes[from].host.Forward(ctx, reqGroup, lead, record.NewBatch(0, []record.Record{{Value: []byte("once")}}))
				res <- result{offset, err}
			}()
			c.waitStepping(t, "the "+lost.String()+" to be lost", drop.done)

			c.net.Disconnect(from, lead)
			c.net.Connect(from, lead)
			var r result
			c.waitStepping(t, "the forward's answer", func() bool { return received(res, &r) })
			if r.err != nil || r.offset != 0 {
				t.Fatalf("the forward sent again: offset %d, %v; want offset 0", r.offset, r.err)
			}
			leaderLog := c.nodes[lead].logs[reqGroup]
			c.waitFor(t, "the record committed", 40, func() bool { return leaderLog.HighWatermark() > 0 })
			c.ticks(5) // a second append, were there one, is committed by then
			if hw := leaderLog.HighWatermark(); hw != 1 {
				t.Fatalf("the leader's high watermark is %d after one forwarded record sent twice, want 1", hw)
			}
		})
	}
}

// reqGroup is the group the tests of requests open on every node.
const reqGroup = 1

// newLedCluster is three nodes with group reqGroup open, led by one of them.
func newLedCluster(t *testing.T) *memCluster {
	c := newMemCluster(t, 3)
	c.open(c.ids, reqGroup)
	c.waitLeader(t, reqGroup, 200)
	return c
}

// received takes a value from ch into v, if one is there.
func received[T any](ch <-chan T, v *T) bool {
	select {
	case *v = <-ch:
		return true
	default:
		return false
	}
}

// waitStepping steps the cluster until cond holds, a millisecond apart:
// what it waits for comes from goroutines of the hosts' (a handler's
// answer) or of the test's (a request's result), not only from the steps.
func (c *memCluster) waitStepping(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %d steps, still waiting for %s", c.steps, what)
		}
		c.step()
		time.Sleep(time.Millisecond)
	}
}

// dropFirst is the first envelope of a kind, dropped on its way by any
// node's dropTransport.
type dropFirst struct {
	kind    raft.Kind
	mu      sync.Mutex
	dropped bool
}

func (d *dropFirst) take(e raft.Envelope) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dropped || e.Kind != d.kind {
		return false
	}
	d.dropped = true
	return true
}

func (d *dropFirst) done() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

// dropTransport sends what its Transport sends, but the envelope drop
// takes.
type dropTransport struct {
	raft.Transport
	drop *dropFirst
}

func (t dropTransport) Send(to uint64, envs []raft.Envelope) {
	kept := make([]raft.Envelope, 0, len(envs))
	for _, e := range envs {
		if !t.drop.take(e) {
			kept = append(kept, e)
		}
	}
	t.Transport.Send(to, kept)
}
