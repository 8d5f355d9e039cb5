package group

import (
	"container/heap"
	"sync"
	"time"
)

// wakeups is the coordinator's schedule: which group must look at its
// deadlines when. A group registers its earliest deadline after every
// change; a registration later than one already pending for the group is
// dropped, since the earlier wake-up registers the next one. A group woken
// early or twice finds nothing due, so the schedule needs no cancellation.
type wakeups struct {
	mu      sync.Mutex
	queue   wakeQueue
	pending map[string]time.Time // earliest registered wake-up per group
	kick    chan struct{}        // tells the loop an earlier wake-up exists
}

func newWakeups() *wakeups {
	return &wakeups{pending: map[string]time.Time{}, kick: make(chan struct{}, 1)}
}

// at asks for group to be woken at t.
func (w *wakeups) at(group string, t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur, ok := w.pending[group]; ok && !t.Before(cur) {
		return
	}
	w.pending[group] = t
	heap.Push(&w.queue, wake{at: t, group: group})
	if w.queue[0].group == group && w.queue[0].at.Equal(t) {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// next is the earliest scheduled wake-up.
func (w *wakeups) next() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return time.Time{}, false
	}
	return w.queue[0].at, true
}

// due removes and returns the groups whose wake-up time has come.
func (w *wakeups) due(now time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var groups []string
	seen := map[string]bool{}
	for len(w.queue) > 0 && !w.queue[0].at.After(now) {
		wk := heap.Pop(&w.queue).(wake)
		if p, ok := w.pending[wk.group]; ok && !p.After(now) {
			delete(w.pending, wk.group)
		}
		if !seen[wk.group] {
			seen[wk.group] = true
			groups = append(groups, wk.group)
		}
	}
	return groups
}

type wake struct {
	at    time.Time
	group string
}

// wakeQueue is a min-heap of wake-ups by time.
type wakeQueue []wake

func (q wakeQueue) Len() int           { return len(q) }
func (q wakeQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q wakeQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *wakeQueue) Push(x any)        { *q = append(*q, x.(wake)) }
func (q *wakeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
