package queuestore

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// env is a Root on a temp directory, restarted or crashed by the test as
// a node would be.
type env struct {
	t    *testing.T
	cfg  Config
	root *Root
}

func newEnv(t *testing.T, tweak ...func(*Config)) *env {
	t.Helper()
	e := &env{t: t, cfg: Config{
		Dir:                  filepath.Join(t.TempDir(), "queues"),
		SegmentBytes:         16 << 20,
		HousekeepingInterval: time.Hour, // tests call Housekeep themselves
		ScrubInterval:        -1,
		Logger:               slog.New(slog.DiscardHandler),
	}}
	for _, f := range tweak {
		f(&e.cfg)
	}
	e.open()
	t.Cleanup(func() {
		if e.root != nil {
			e.root.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	root, err := OpenRoot(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	root.Start()
	e.root = root
}

// restart closes the root cleanly and opens a new one.
func (e *env) restart() {
	e.t.Helper()
	if err := e.root.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.open()
}

// crash abandons the root as a killed process would and opens a new one.
func (e *env) crash() {
	e.root.Abandon()
	e.open()
}

// queue is what a queue does with its store, reduced to its lock.
type queue struct {
	t  *testing.T
	mu sync.Mutex
	s  *Store
}

func (e *env) owner(q *queue) Owner {
	return Owner{Lock: &q.mu, Name: "q", VHost: "/", Crash: func(err error) {
		e.t.Errorf("queue crashed: %v", err)
	}}
}

// create makes the store of a new queue with the given ID.
func (e *env) create(id string) *queue {
	q := &queue{t: e.t}
	q.s = e.root.Create(id, e.owner(q))
	return q
}

// reopen opens the store of an existing queue, as at start-up.
func (e *env) reopen(id string) *queue {
	e.t.Helper()
	q := &queue{t: e.t}
	s, err := e.root.Open(id, e.owner(q))
	if err != nil {
		e.t.Fatalf("Open(%s): %v", id, err)
	}
	q.s = s
	return q
}

// append logs a message with this body and returns its offset.
func (q *queue) append(body string) int64 {
	q.t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	off, err := q.s.AppendLocked(EncodeMessage(Message{RoutingKey: "q", Body: []byte(body)}, time.Now().UnixMilli()))
	if err != nil {
		q.t.Fatalf("append: %v", err)
	}
	return off
}

// buffer holds a message with this body back, as a publisher does.
func (q *queue) buffer(body string) int64 {
	q.t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	off, err := q.s.BufferLocked(EncodeMessage(Message{RoutingKey: "q", Body: []byte(body)}, time.Now().UnixMilli()))
	if err != nil {
		q.t.Fatalf("buffer: %v", err)
	}
	return off
}

func (q *queue) sync() {
	q.t.Helper()
	if err := q.s.Sync(); err != nil {
		q.t.Fatalf("sync: %v", err)
	}
}

// deliver, settle and returned are a consumer getting, acknowledging and
// returning the message at off.
func (q *queue) deliver(off int64) {
	q.mu.Lock()
	q.s.DeliveredLocked(off)
	q.mu.Unlock()
}

func (q *queue) settle(off int64) {
	q.mu.Lock()
	q.s.SettleLocked(off)
	q.mu.Unlock()
}

func (q *queue) returned(off int64, n uint32) {
	q.mu.Lock()
	q.s.NoteReturnLocked(off, n)
	q.mu.Unlock()
}

func (q *queue) housekeep() {
	q.t.Helper()
	if err := q.s.Housekeep(); err != nil {
		q.t.Fatalf("housekeep: %v", err)
	}
}

// recovered is a message a reopened store holds.
type recoveredMessage struct {
	body        string
	redelivered bool
	returns     uint32
}

// unsettled lists the messages a reopened store holds, in order.
func (q *queue) unsettled() []recoveredMessage {
	q.t.Helper()
	var out []recoveredMessage
	q.s.Unsettled(func(off int64, redelivered bool, returns uint32) {
		q.mu.Lock()
		defer q.mu.Unlock()
		err := q.s.ReadLocked(off, 1, func(got, _ int64, m Message) bool {
			if got != off {
				q.t.Fatalf("read at %d gave offset %d", off, got)
			}
			out = append(out, recoveredMessage{body: string(m.Body), redelivered: redelivered, returns: returns})
			return false
		})
		if err != nil {
			q.t.Fatalf("read %d: %v", off, err)
		}
	})
	return out
}

// bodies are the bodies of the messages a reopened store holds.
func (q *queue) bodies() []string {
	var out []string
	for _, m := range q.unsettled() {
		out = append(out, m.body)
	}
	return out
}

func bodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}
