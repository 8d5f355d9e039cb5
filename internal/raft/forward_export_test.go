package raft

import "time"

// AgeForwardMemory moves the clock h's memory of the forwards it took
// ages on by d, as d awake would.
func (h *Host) AgeForwardMemory(d time.Duration) {
	h.mu.Lock()
	h.awake.awake += d
	h.mu.Unlock()
}
