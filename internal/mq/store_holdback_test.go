package mq

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/queuestore"
)

// queueNamed returns the queue of the default vhost named name.
func (e *env) queueNamed(name string) *queue {
	e.t.Helper()
	e.v.mu.RLock()
	q := e.v.queues[name]
	e.v.mu.RUnlock()
	if q == nil {
		e.t.Fatalf("no queue %q", name)
	}
	return q
}

// logEnd is the end offset of a durable queue's messages log: what has
// been written to it (0 before the log exists).
func (q *queue) logEnd() int64 { return q.local().Extent().End }

// A Publisher's persistent messages to durable queues are enqueued at once
// but written to each queue's log in one append, before the fsync their
// confirms wait for, in publish order.
func TestPublisherHoldsBackQueueRecordsUntilSync(t *testing.T) {
	e := newEnv(t)
	e.declareExchange("fan", "fanout", true, nil)
	names := []string{"a", "b", "c"}
	for _, n := range names {
		e.declareQueue(n, true)
		e.bind(n, "fan", "", nil)
	}
	p := e.v.NewPublisher()
	const n = 50
	var last Durability
	for i := range n {
		last = p.mustPublish(t, persistent("fan", "", fmt.Sprint(i))).Durable
	}
	for _, name := range names {
		q := e.queueNamed(name)
		if got := e.messages(name); got != n {
			t.Fatalf("queue %s holds %d messages before the flush, want %d", name, got, n)
		}
		if end := q.logEnd(); end != 0 {
			t.Fatalf("queue %s: %d messages written before the flush, want them held back", name, end)
		}
	}
	p.Flush()
	if err := last.wait(); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		q := e.queueNamed(name)
		if end, synced := q.logEnd(), q.local().Extent().Synced; end != n || synced < n {
			t.Fatalf("queue %s: log end %d, synced to %d after the confirm; want %d", name, end, synced, n)
		}
		var got []string
		q.mu.Lock()
		err := q.store.ReadLocked(0, 1<<20, func(off, ts int64, m queuestore.Message) bool {
			got = append(got, string(m.Body))
			return true
		})
		q.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint(bodiesOf(n)); fmt.Sprint(got) != want {
			t.Fatalf("queue %s log holds %v, want %v", name, got, want)
		}
	}
}

func bodiesOf(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}

// Messages held back while the queue is over its memory budget are paged
// out at once; reading them back writes them first.
func TestHeldBackMessagesCanBePagedIn(t *testing.T) {
	const limit = 16 << 10
	e := newEnv(t, func(c *Config) { c.QueueMemoryBytes = limit })
	e.declareQueue("q", true)
	p := e.v.NewPublisher()
	body := strings.Repeat("b", 1000)
	const n = 100
	for i := range n {
		p.mustPublish(t, persistent("", "q", fmt.Sprintf("%04d%s", i, body)))
	}
	if used := e.r.MemoryUsed(); used > limit+2000 {
		t.Fatalf("MemoryUsed %d with a %d limit: nothing paged out", used, limit)
	}
	got := e.drain("q")
	if len(got) != n {
		t.Fatalf("%d messages drained, want %d", len(got), n)
	}
	for i, b := range got {
		if want := fmt.Sprintf("%04d%s", i, body); b != want {
			t.Fatalf("message %d is %.8s... (%d bytes)", i, b, len(b))
		}
	}
	p.Flush()
}

// A settlement is never written ahead of its message: should the process
// die with the message unwritten, its offset would go to a new message
// after the restart, and that one would be lost at the next.
func TestSettlementsNeverAheadOfMessagesLog(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	p := e.v.NewPublisher()
	const n = 20
	for i := range n {
		p.mustPublish(t, persistent("", "q", fmt.Sprint(i)))
	}
	if got := len(e.drain("q")); got != n { // no-ack: settled at once
		t.Fatalf("%d messages drained, want %d", got, n)
	}
	q := e.queueNamed("q")
	if err := q.local().Housekeep(); err != nil {
		t.Fatal(err)
	}
	if end := q.logEnd(); end != n {
		t.Fatalf("settlements written with the messages log ending at %d, want %d", end, n)
	}
	e.crash() // the publisher never flushed: no sync ran
	if got := e.drain("q"); len(got) != 0 {
		t.Fatalf("settled messages came back: %v", got)
	}
	for i := range 3 {
		waitDurable(t, e.publish(persistent("", "q", fmt.Sprint("new", i))))
	}
	e.restart()
	if got, want := fmt.Sprint(e.drain("q")), "[new0 new1 new2]"; got != want {
		t.Fatalf("after a restart the queue holds %s, want %s", got, want)
	}
}

// Closing the registry writes what publishers held back, so a clean
// restart finds every message.
func TestCloseWritesHeldBackMessages(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	p := e.v.NewPublisher()
	for i := range 5 {
		p.mustPublish(t, persistent("", "q", fmt.Sprint(i)))
	}
	e.restart()
	if got, want := fmt.Sprint(e.drain("q")), "[0 1 2 3 4]"; got != want {
		t.Fatalf("after a restart the queue holds %s, want %s", got, want)
	}
}
