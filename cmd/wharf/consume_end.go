package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
)

// endTracker follows, per partition being consumed, the next offset to
// read against the partition's end (its high watermark). It prints a
// notice the first time a partition's consumer is waiting at its end, and
// tells when every partition is at its end (--exit-at-end).
//
// The poll loop reports what it consumed; in a group, the assignment
// callbacks add and remove partitions from the client's goroutine.
type endTracker struct {
	out        io.Writer // where notices go (stderr)
	topic      string
	exitAtEnd  bool
	mu         sync.Mutex
	partitions map[int32]*partitionEnd
	// wake interrupts a poll that waits for records when every
	// partition reaches its end outside the poll loop (a group
	// assignment); nil between polls.
	wake func()
}

type partitionEnd struct {
	next, end int64
	noticed   bool // a notice said this partition is at its end
}

func newEndTracker(out io.Writer, topic string, exitAtEnd bool) *endTracker {
	return &endTracker{out: out, topic: topic, exitAtEnd: exitAtEnd, partitions: map[int32]*partitionEnd{}}
}

// start begins following a partition that is read from next and ends at
// end.
func (t *endTracker) start(positions map[int32]partitionEnd) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, pos := range positions {
		t.partitions[p] = &partitionEnd{next: pos.next, end: pos.end}
	}
	t.noticeLocked()
	if t.wake != nil && t.exitAtEnd && t.allAtEndLocked() {
		t.wake()
	}
}

// consumed records that a partition has been read up to next, and that
// its end is now end (the high watermark of the fetch).
func (t *endTracker) consumed(p int32, next, end int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pos := t.partitions[p]; pos != nil {
		pos.next, pos.end = max(pos.next, next), max(pos.end, end)
	}
}

// forget stops following revoked partitions.
func (t *endTracker) forget(partitions []int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range partitions {
		delete(t.partitions, p)
	}
}

// notice prints the partitions that have newly reached their end.
func (t *endTracker) notice() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.noticeLocked()
}

func (t *endTracker) noticeLocked() {
	var reached []string
	for _, p := range slices.Sorted(maps.Keys(t.partitions)) {
		pos := t.partitions[p]
		if pos.noticed || pos.next < pos.end {
			continue
		}
		pos.noticed = true
		reached = append(reached, fmt.Sprintf("%s[%d] at offset %d", t.topic, p, pos.next))
	}
	if len(reached) == 0 {
		return
	}
	then := "waiting for new records"
	if t.exitAtEnd {
		then = "not waiting for more (--exit-at-end)"
	}
	fmt.Fprintf(t.out, "wharf: reached the end of %s; %s\n", strings.Join(reached, ", "), then)
}

// allAtEnd reports whether the consumer follows at least one partition
// and has read every one to its end.
func (t *endTracker) allAtEnd() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.allAtEndLocked()
}

func (t *endTracker) allAtEndLocked() bool {
	for _, pos := range t.partitions {
		if pos.next < pos.end {
			return false
		}
	}
	return len(t.partitions) > 0
}

// setWake sets (or with nil, clears) the function that interrupts the
// current poll.
func (t *endTracker) setWake(wake func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.wake = wake
}
