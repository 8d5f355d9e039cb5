package raft

import (
	"errors"
	"testing"
	"time"
)

// TestForwardMemoryKeepsForwardsBeingProposed: a leader that answered
// forwardMemoryMax forwards since it took one still being proposed
// still knows that one: a repeat of it is not taken as new (proposed a
// second time). The answers stay bounded, and those older than
// forwardMemoryTime are forgotten even behind it.
func TestForwardMemoryKeepsForwardsBeingProposed(t *testing.T) {
	var m forwardMemory
	var start time.Duration
	slow := forwardKey{from: 2, id: 1}
	if known, _ := m.take(slow, start, false); known {
		t.Fatal("a new forward not taken")
	}
	for id := uint64(2); id <= forwardMemoryMax+1; id++ {
		key := forwardKey{from: 2, id: id}
		m.take(key, start, false)
		m.answered(key, Envelope{Kind: KindForwardReply, Index: id}, start)
	}
	if known, _ := m.take(slow, start, false); !known {
		t.Fatalf("a forward still being proposed taken again after %d others were answered", forwardMemoryMax)
	}
	if n := len(m.byKey); n > forwardMemoryMax+1 {
		t.Fatalf("%d forwards remembered, want at most %d answered and the one being proposed", n, forwardMemoryMax)
	}
	later := start + forwardMemoryTime
	m.take(forwardKey{from: 2, id: forwardMemoryMax + 2}, later, false)
	if n := len(m.byKey); n != 2 {
		t.Fatalf("%d forwards remembered after forwardMemoryTime, want the two being proposed", n)
	}
	if known, _ := m.take(slow, later, false); !known {
		t.Fatal("a forward still being proposed forgotten after forwardMemoryTime")
	}
}

// TestForwardMemoryRemembersYoungAnswersPastTheCap: a leader that
// answered more than forwardMemoryMax forwards within requestTTL still
// knows the first of them: a repeat of it, sent again when its
// connection broke and read before it expired, is not taken as new
// (applied a second time). Past forwardMemoryMin the cap holds again.
func TestForwardMemoryRemembersYoungAnswersPastTheCap(t *testing.T) {
	var m forwardMemory
	first := forwardKey{from: 2, id: 1}
	m.take(first, 0, false)
	m.answered(first, Envelope{Kind: KindForwardReply, Index: 1}, 0)
	for id := uint64(2); id <= forwardMemoryMax+1; id++ {
		key := forwardKey{from: 3, id: id}
		m.take(key, time.Second, false)
		m.answered(key, Envelope{Kind: KindForwardReply, Index: id}, time.Second)
	}
	if known, answered := m.take(first, requestTTL, false); !known || answered == nil {
		t.Fatalf("a repeat of a forward answered %v ago, read before it expired, taken as new after %d others were answered", requestTTL, forwardMemoryMax)
	}
	m.take(forwardKey{from: 2, id: 2}, time.Second+forwardMemoryMin, false)
	if n := len(m.order); n > forwardMemoryMax {
		t.Fatalf("%d answers remembered past forwardMemoryMin, want at most %d", n, forwardMemoryMax)
	}
}

// TestForwardMemoryTakesNoLateForward: a forward that arrives expired is
// not taken, nor remembered; one taken already is known, expired or not.
func TestForwardMemoryTakesNoLateForward(t *testing.T) {
	var m forwardMemory
	late := forwardKey{from: 2, id: 1}
	if known, _ := m.take(late, 0, true); known || len(m.byKey) != 0 {
		t.Fatalf("a late forward: known %v, %d remembered; want not known, none remembered", known, len(m.byKey))
	}
	taken := forwardKey{from: 2, id: 2}
	m.take(taken, 0, false)
	m.answered(taken, Envelope{Kind: KindForwardReply, Index: 2}, 0)
	if known, answered := m.take(taken, 0, true); !known || answered == nil {
		t.Fatal("a late repeat of a forward answered not known as taken")
	}
}

// TestAwakeClockLeavesOutStalls: the clock runs with the wall clock
// between readings close together, and counts at most maxAwakeStep for
// readings further apart: a process stopped for minutes ages its
// memories by a second.
func TestAwakeClockLeavesOutStalls(t *testing.T) {
	var c AwakeClock
	start := time.Now()
	if got := c.Read(start); got != 0 {
		t.Fatalf("first reading %v, want 0", got)
	}
	if got := c.Read(start.Add(300 * time.Millisecond)); got != 300*time.Millisecond {
		t.Fatalf("after 300ms: %v", got)
	}
	if got := c.Read(start.Add(300*time.Millisecond + 5*time.Minute)); got != 300*time.Millisecond+maxAwakeStep {
		t.Fatalf("after a 5-minute stall: %v, want %v", got, 300*time.Millisecond+maxAwakeStep)
	}
	if got := c.Read(start); got != 300*time.Millisecond+maxAwakeStep {
		t.Fatalf("after the wall clock went back: %v, want no change", got)
	}
}

// TestBrokenConnectionFailsExpiredForward: when a connection breaks, a
// forward still waiting is sent again under its id while it has time
// left; one that expired fails with ErrUnreachable instead (the leader
// would refuse it), for its caller to try again if it will.
func TestBrokenConnectionFailsExpiredForward(t *testing.T) {
	h, err := NewHost(Config{NodeID: 1, Transport: NewMemNetwork().Transport(1)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	now := time.Now()
	for id, expires := range map[uint64]time.Time{1: now.Add(-time.Millisecond), 2: now.Add(time.Minute)} {
		h.forwards[id] = &pendingRequest{to: 2, env: Envelope{Kind: KindForward, Group: 1, Index: id, Expires: expires}, done: make(chan forwardResult, 1)}
	}
	h.connectionBroke(2, 2)
	select {
	case r := <-h.forwards[1].done:
		if !errors.Is(r.err, ErrUnreachable) {
			t.Fatalf("the expired forward failed with %v, want ErrUnreachable", r.err)
		}
	default:
		t.Fatal("the expired forward still waits")
	}
	if len(h.forwards[2].done) != 0 {
		t.Fatal("the forward with time left failed")
	}
	if out := h.outbox[2]; len(out) != 1 || out[0].Index != 2 {
		t.Fatalf("sent again: %+v, want the forward with time left", out)
	}
}
