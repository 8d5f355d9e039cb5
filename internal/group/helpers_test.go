package group

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/record"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// harness is a coordinator over a real broker in a temp dir, on a fake
// clock, with no timer goroutine: tests move time with advance.
type harness struct {
	t     *testing.T
	dir   string
	b     *broker.Broker
	c     *Coordinator
	clock *fakeClock
	cfg   Config
}

func newHarness(t *testing.T, tweak ...func(*Config)) *harness {
	t.Helper()
	return newHarnessWith(t, nil, tweak...)
}

// newHarnessWith is newHarness that lets before prepare the broker (say,
// create __consumer_offsets its own way) before the coordinator opens.
func newHarnessWith(t *testing.T, before func(*broker.Broker), tweak ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), clock: &fakeClock{now: time.Date(2026, 10, 20, 9, 0, 0, 0, time.UTC)}}
	h.cfg = Config{
		InitialRebalanceDelay:  -1,
		MinSessionTimeout:      time.Second,
		OffsetsTopicPartitions: 3,
		Now:                    h.clock.Now,
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, fn := range tweak {
		fn(&h.cfg)
	}
	var err error
	h.b, err = broker.Open(broker.Config{DataDir: h.dir, Logger: h.cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(h.b)
	}
	h.start()
	t.Cleanup(func() {
		h.c.Close()
		h.b.Close()
	})
	return h
}

func (h *harness) start() {
	h.t.Helper()
	cfg := h.cfg
	cfg.Broker = h.b
	c, err := open(cfg)
	if err != nil {
		h.t.Fatalf("open coordinator: %v", err)
	}
	h.c = c
}

// restart closes the coordinator and the broker and opens both again on
// the same directory, as a node restart does.
func (h *harness) restart() {
	h.t.Helper()
	h.c.Close()
	if err := h.b.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.restartOpened()
}

// restartOpened opens the broker and the coordinator again on the same
// directory, once the test closed them.
func (h *harness) restartOpened() {
	h.t.Helper()
	var err error
	h.b, err = broker.Open(broker.Config{DataDir: h.dir, Logger: h.cfg.Logger})
	if err != nil {
		h.t.Fatal(err)
	}
	h.start()
}

// advance moves the clock and runs every group deadline that passed.
func (h *harness) advance(d time.Duration) {
	h.c.fireDue(h.clock.add(d))
}

func (h *harness) createTopic(name string, partitions int32) *broker.Topic {
	h.t.Helper()
	t, err := h.b.CreateTopic(broker.TopicSpec{Name: name, Partitions: partitions}, false)
	if err != nil {
		h.t.Fatal(err)
	}
	return t
}

// pending is a parked request's answer, once it comes.
type pending[T any] struct{ ch chan T }

func (p pending[T]) ready() (T, bool) {
	select {
	case r := <-p.ch:
		p.ch <- r // keep it for later calls
		return r, true
	default:
		var zero T
		return zero, false
	}
}

func (p pending[T]) must(t *testing.T) T {
	t.Helper()
	r, ok := p.ready()
	if !ok {
		t.Fatal("request still waiting, want an answer")
	}
	return r
}

func (p pending[T]) mustWait(t *testing.T) {
	t.Helper()
	if r, ok := p.ready(); ok {
		t.Fatalf("request answered (%+v), want it still waiting", r)
	}
}

func (h *harness) join(req JoinRequest) pending[JoinResponse] {
	if req.ProtocolType == "" {
		req.ProtocolType = "consumer"
	}
	if req.Protocols == nil {
		req.Protocols = []Protocol{{Name: "range", Metadata: []byte("m")}}
	}
	if req.SessionTimeout == 0 {
		req.SessionTimeout = 10 * time.Second
	}
	if req.RebalanceTimeout == 0 {
		req.RebalanceTimeout = 20 * time.Second
	}
	if req.ClientID == "" {
		req.ClientID = "client"
	}
	ch, reply := replyOnce[JoinResponse]()
	h.c.join(req, reply)
	return pending[JoinResponse]{ch}
}

func (h *harness) sync(req SyncRequest) pending[SyncResponse] {
	ch, reply := replyOnce[SyncResponse]()
	h.c.sync(req, reply)
	return pending[SyncResponse]{ch}
}

// joinNew joins a dynamic member the KIP-394 way (two JoinGroups) and
// returns its pending second join.
func (h *harness) joinNew(group string, tweak ...func(*JoinRequest)) (string, pending[JoinResponse]) {
	h.t.Helper()
	req := JoinRequest{Group: group, RequireKnownMemberID: true}
	for _, fn := range tweak {
		fn(&req)
	}
	first := h.join(req).must(h.t)
	if !errors.Is(first.Err, ErrMemberIDRequired) || first.MemberID == "" {
		h.t.Fatalf("first join: %+v, want MEMBER_ID_REQUIRED with an id", first)
	}
	req.MemberID = first.MemberID
	return first.MemberID, h.join(req)
}

// stableGroup builds a stable group of n dynamic members, adding them one
// at a time, and returns their ids (the first is the leader) and the
// generation. Each member is assigned "a-<id>".
func (h *harness) stableGroup(group string, n int) ([]string, int32) {
	h.t.Helper()
	var ids []string
	var gen int32
	for range n {
		id, p := h.joinNew(group)
		joins := map[string]pending[JoinResponse]{id: p}
		for _, old := range ids {
			joins[old] = h.join(JoinRequest{Group: group, MemberID: old, RequireKnownMemberID: true})
		}
		ids = append(ids, id)
		gen = h.syncAll(group, ids, joins)
	}
	return ids, gen
}

// syncAll takes every member's JoinGroup answer and sends the SyncGroups
// (the leader assigns "a-<id>" to each), checking that all succeed.
func (h *harness) syncAll(group string, ids []string, joins map[string]pending[JoinResponse]) int32 {
	h.t.Helper()
	var leader string
	var gen int32
	for _, id := range ids {
		r := joins[id].must(h.t)
		if r.Err != nil {
			h.t.Fatalf("join of %s: %v", id, r.Err)
		}
		gen, leader = r.Generation, r.Leader
	}
	assign := map[string][]byte{}
	for _, id := range ids {
		assign[id] = []byte("a-" + id)
	}
	syncs := map[string]pending[SyncResponse]{}
	for _, id := range ids {
		req := SyncRequest{Group: group, Generation: gen, MemberID: id}
		if id == leader {
			req.Assignments = assign
		}
		syncs[id] = h.sync(req)
	}
	for _, id := range ids {
		if r := syncs[id].must(h.t); r.Err != nil || string(r.Assignment) != "a-"+id {
			h.t.Fatalf("sync of %s: %+v", id, r)
		}
	}
	if got := h.classicState(group); got != classicStable {
		h.t.Fatalf("group %s is %s after every sync, want Stable", group, got)
	}
	return gen
}

func (h *harness) classicState(name string) classicState {
	var s classicState = classicDead
	h.c.withGroup(name, false, func(g *group) { s = g.classic.state })
	return s
}

func (h *harness) generation(name string) int32 {
	var gen int32 = -1
	h.c.withGroup(name, false, func(g *group) { gen = g.classic.generation })
	return gen
}

// produceAt appends one record with the given timestamp.
func produceAt(t *testing.T, p *broker.Partition, ts time.Time) {
	t.Helper()
	batch := record.NewBatch(ts.UnixMilli(), []record.Record{{Value: []byte("v")}})
	if _, _, err := p.Produce(batch, -1); err != nil {
		t.Fatal(err)
	}
}

// consumerJoin joins a KIP-848 member and fails the test on an error.
func (h *harness) consumerJoin(group, id string, topics []string, tweak ...func(*ConsumerHeartbeatRequest)) ConsumerHeartbeatResponse {
	h.t.Helper()
	req := ConsumerHeartbeatRequest{Group: group, MemberID: id, SubscribedTopicNames: topics, Owned: []TopicPartitions{}, RebalanceTimeout: 30 * time.Second}
	for _, fn := range tweak {
		fn(&req)
	}
	r := h.c.ConsumerGroupHeartbeat(req)
	if r.Err != nil {
		h.t.Fatalf("join of %s: %v", id, r.Err)
	}
	return r
}
