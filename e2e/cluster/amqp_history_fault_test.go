package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The AMQP fault tests' checker: a total queue, as RabbitMQ's own Jepsen
// test checks its quorum queues. Every message published is numbered
// ("QUEUE/CLIENT/SEQ", its body); the history records which were handed
// to a client to publish (attempted), which the broker confirmed, and
// every delivery a consumer received. Then:
//
//   - lost: confirmed and never delivered: must be 0;
//   - unexpected: delivered, but never attempted, or from another queue
//     than the one its body names: must be 0;
//   - duplicated: deliveries of a message past its first. At least once
//     allows them (an ack lost with its connection, a consumer's node or
//     the leader dying with deliveries held): they are counted and
//     reported, with how many of them were not flagged redelivered (a
//     publish forwarded twice by a node whose first try's answer was
//     lost, docs/replication.md).
//
// A message attempted but not confirmed (nacked, or its connection lost
// first) is indeterminate: it may be delivered or not.

// totalQueue is one run's history, shared by every client.
type totalQueue struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every confirm and first delivery
	queues  []string
	sent    map[string]int // per client: numbers below were attempted
	start   time.Time
	// per message id
	confirmed map[string]bool
	delivered map[string][]delivery
	// per queue, for progress
	confirmedIn, consumedIn map[string]int
	deliveries              int
	unexpected              []string
	// stranded are the confirmed messages the consumers that ran through
	// the faults did not get, all along (markStranded).
	stranded []string
}

// delivery is one delivery of a message, as a consumer saw it.
type delivery struct {
	consumer    string
	at          time.Duration // since the history began
	redelivered bool
	count       any // x-delivery-count
}

func (d delivery) String() string {
	return fmt.Sprintf("%s at %v redelivered %v x-delivery-count %v", d.consumer, d.at.Round(time.Millisecond), d.redelivered, d.count)
}

func newTotalQueue(queues []string) *totalQueue {
	return &totalQueue{changed: make(chan struct{}), queues: queues, sent: map[string]int{}, start: time.Now(),
		confirmed: map[string]bool{}, delivered: map[string][]delivery{},
		confirmedIn: map[string]int{}, consumedIn: map[string]int{}}
}

// attempt hands out client's next message for queue: its body.
func (h *totalQueue) attempt(client, queue string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	seq := h.sent[client]
	h.sent[client]++
	return fmt.Sprintf("%s/%s/%d", queue, client, seq)
}

// confirm records that the broker confirmed message id (a body attempt
// returned).
func (h *totalQueue) confirm(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.confirmed[id] {
		return
	}
	h.confirmed[id] = true
	queue, _, _ := strings.Cut(id, "/")
	h.confirmedIn[queue]++
	h.notifyLocked()
}

// deliver records a delivery of body from queue to consumer.
func (h *totalQueue) deliver(consumer, queue string, body []byte, redelivered bool, count any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := string(body)
	h.deliveries++
	if !h.attemptedLocked(queue, id) {
		h.unexpected = append(h.unexpected, fmt.Sprintf("%q from %s", body, queue))
		return
	}
	h.delivered[id] = append(h.delivered[id], delivery{consumer, time.Since(h.start), redelivered, count})
	if len(h.delivered[id]) == 1 {
		h.consumedIn[queue]++
		h.notifyLocked()
	}
}

// attemptedLocked reports whether id is a message some client was handed
// for queue.
func (h *totalQueue) attemptedLocked(queue, id string) bool {
	parts := strings.Split(id, "/")
	if len(parts) != 3 {
		return false
	}
	seq, err := strconv.Atoi(parts[2])
	return err == nil && parts[0] == queue && strconv.Itoa(seq) == parts[2] && seq >= 0 && seq < h.sent[parts[1]]
}

func (h *totalQueue) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// progressMark is, per queue, how many messages were confirmed and how
// many consumed (first deliveries) at one moment.
type progressMark struct{ confirmed, consumed map[string]int }

func (h *totalQueue) mark() progressMark {
	h.mu.Lock()
	defer h.mu.Unlock()
	return progressMark{confirmed: maps.Clone(h.confirmedIn), consumed: maps.Clone(h.consumedIn)}
}

// waitProgress waits until every queue has n more messages confirmed and
// n more consumed than at since.
func (h *totalQueue) waitProgress(ctx context.Context, since progressMark, n int) error {
	for {
		h.mu.Lock()
		var behind []string
		for _, q := range h.queues {
			if c, d := h.confirmedIn[q]-since.confirmed[q], h.consumedIn[q]-since.consumed[q]; c < n || d < n {
				behind = append(behind, fmt.Sprintf("%s: %d confirmed, %d consumed", q, c, d))
			}
		}
		changed := h.changed
		h.mu.Unlock()
		if len(behind) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("short of %d more confirmed and consumed per queue: %s", n, strings.Join(behind, "; "))
		}
	}
}

// waitDrained waits until every confirmed message was delivered.
func (h *totalQueue) waitDrained(ctx context.Context) error {
	for {
		h.mu.Lock()
		missing := h.lostLocked()
		changed := h.changed
		h.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%d confirmed messages not delivered", len(missing))
		}
	}
}

// markStranded notes the confirmed messages not delivered so far as
// stranded.
func (h *totalQueue) markStranded() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stranded = h.lostLocked()
}

// lostLocked are the confirmed messages never delivered, sorted.
func (h *totalQueue) lostLocked() []string {
	var lost []string
	for id := range h.confirmed {
		if len(h.delivered[id]) == 0 {
			lost = append(lost, id)
		}
	}
	slices.Sort(lost)
	return lost
}

// verdict is the checker's account of a run.
type verdict struct {
	attempted, confirmed, consumed, deliveries int
	lost, unexpected, stranded                 []string
	duplicated, unflagged                      int // deliveries past the first; of them not flagged redelivered
	firstUnflagged                             map[string][]delivery
	indeterminateConsumed                      int // attempted, not confirmed, delivered
}

func (h *totalQueue) verdict() verdict {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := verdict{confirmed: len(h.confirmed), consumed: len(h.delivered), deliveries: h.deliveries,
		lost: h.lostLocked(), unexpected: slices.Clone(h.unexpected), stranded: slices.Clone(h.stranded)}
	for _, n := range h.sent {
		v.attempted += n
	}
	v.firstUnflagged = map[string][]delivery{}
	for id, ds := range h.delivered {
		v.duplicated += len(ds) - 1
		// A message's first delivery is not flagged; every later one
		// should be.
		for _, d := range ds[1:] {
			if !d.redelivered {
				v.unflagged++
				if len(v.firstUnflagged) < 5 {
					v.firstUnflagged[id] = ds
				}
			}
		}
		if !h.confirmed[id] {
			v.indeterminateConsumed++
		}
	}
	return v
}

// String is the figures' line.
func (v verdict) String() string {
	return fmt.Sprintf("attempted %d, confirmed %d, consumed %d (%d deliveries), lost %d, stranded %d, unexpected %d, "+
		"duplicated %d (%d not flagged redelivered), unconfirmed but consumed %d",
		v.attempted, v.confirmed, v.consumed, v.deliveries, len(v.lost), len(v.stranded), len(v.unexpected),
		v.duplicated, v.unflagged, v.indeterminateConsumed)
}

// check fails t unless lost = unexpected = 0; it logs the deliveries of
// the first duplicates not flagged redelivered.
func (v verdict) check(t *testing.T) {
	t.Helper()
	for id, ds := range v.firstUnflagged {
		t.Logf("delivered again, not flagged redelivered: %s: %v", id, ds)
	}
	if len(v.lost) > 0 {
		t.Errorf("lost %d confirmed messages, first %v", len(v.lost), v.lost[:min(10, len(v.lost))])
	}
	if len(v.stranded) > 0 {
		t.Errorf("%d confirmed messages stranded: not delivered to the consumers that ran through the faults "+
			"within %v of the end, first %v", len(v.stranded), drainWait, v.stranded[:min(10, len(v.stranded))])
	}
	if len(v.unexpected) > 0 {
		t.Errorf("%d unexpected deliveries, first %v", len(v.unexpected), v.unexpected[:min(10, len(v.unexpected))])
	}
}
