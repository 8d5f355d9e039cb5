package raft

import (
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
	start := time.Now()
	slow := forwardKey{from: 2, id: 1}
	if first, _ := m.take(slow, start); !first {
		t.Fatal("a new forward not taken")
	}
	for id := uint64(2); id <= forwardMemoryMax+1; id++ {
		key := forwardKey{from: 2, id: id}
		m.take(key, start)
		m.answered(key, Envelope{Kind: KindForwardReply, Index: id}, start)
	}
	if first, _ := m.take(slow, start); first {
		t.Fatalf("a forward still being proposed taken again after %d others were answered", forwardMemoryMax)
	}
	if n := len(m.byKey); n > forwardMemoryMax+1 {
		t.Fatalf("%d forwards remembered, want at most %d answered and the one being proposed", n, forwardMemoryMax)
	}
	later := start.Add(forwardMemoryTime)
	m.take(forwardKey{from: 2, id: forwardMemoryMax + 2}, later)
	if n := len(m.byKey); n != 2 {
		t.Fatalf("%d forwards remembered after forwardMemoryTime, want the two being proposed", n)
	}
	if first, _ := m.take(slow, later); first {
		t.Fatal("a forward still being proposed forgotten after forwardMemoryTime")
	}
}
