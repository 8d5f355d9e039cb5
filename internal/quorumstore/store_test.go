package quorumstore

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/queuestore"
	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

var quiet = slog.New(slog.DiscardHandler)

// startHost starts a Raft host of one node, closed by the test's cleanup.
func startHost(t *testing.T) *raft.Host {
	t.Helper()
	h, err := raft.NewHost(raft.Config{NodeID: 1, TickInterval: 10 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	t.Cleanup(h.Close)
	return h
}

// enqueue buffers one message per body and returns their offsets.
func enqueue(t *testing.T, s *Store, bodies ...string) map[string]int64 {
	t.Helper()
	off := map[string]int64{}
	for _, body := range bodies {
		o, err := s.BufferLocked(queuestore.Message{Body: []byte(body)}, 1, ForwardedAs{})
		if err != nil {
			t.Fatal(err)
		}
		off[body] = o
	}
	return off
}

// openLeading opens the store of a one-member group in dir on h and waits
// until it leads and has replayed the log.
func openLeading(t *testing.T, h *raft.Host, dir string) *Store {
	t.Helper()
	l, err := replica.OpenRaft(dir, replica.DefaultConfig(), replica.RaftOptions{Host: h, Group: 1 << 63, Members: []uint64{1}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	s := Open(l, quiet)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		changed := s.Changed()
		if _, _, leading := s.Leadership(); leading {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("the group elected no leader")
		}
	}
	if err := s.Replay(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

type unsettled struct {
	body        string
	redelivered bool
	returns     uint32
}

// unsettledOf lists what the store's last Replay left unsettled, with
// the bodies.
func unsettledOf(t *testing.T, s *Store) []unsettled {
	t.Helper()
	var out []unsettled
	offs := map[int64]int{}
	s.Unsettled(func(off int64, redelivered bool, returns uint32) {
		offs[off] = len(out)
		out = append(out, unsettled{redelivered: redelivered, returns: returns})
	})
	if err := s.Scan(0, func(off, _ int64, m queuestore.Message) bool {
		if i, ok := offs[off]; ok {
			out[i].body = string(m.Body)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReplayRebuildsQueue: a new leader's queue is the committed log's:
// settled messages gone, returned ones redelivered with their count, and
// those delivered and not settled returned once more, a return the new
// leader logs, so that a message it hands out again before it stops too
// is counted twice by the next.
func TestReplayRebuildsQueue(t *testing.T) {
	h, dir := startHost(t), t.TempDir()
	s := openLeading(t, h, dir)
	off := enqueue(t, s, "a", "b", "c", "d")
	s.DeliveredLocked(off["a"])
	s.DeliveredLocked(off["b"])
	s.NoteReturnLocked(off["b"], 1)
	s.DeliveredLocked(off["c"])
	s.SettleLocked(off["c"])
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The second leader hands a out again before it stops: the third
	// counts both returns.
	for round, want := range [][]unsettled{
		{{"a", true, 1}, {"b", true, 1}, {"d", false, 0}},
		{{"a", true, 2}, {"b", true, 1}, {"d", false, 0}},
	} {
		s = openLeading(t, h, dir)
		got := unsettledOf(t, s)
		if len(got) != len(want) {
			t.Fatalf("replay %d: %+v, want %+v", round, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("replay %d: %+v, want %+v", round, got, want)
			}
		}
		s.DeliveredLocked(off["a"])
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTruncateCutsSettledLog: a committed truncate cuts the log below the
// lowest unsettled message, and the queue replayed from what is left is
// the same.
func TestTruncateCutsSettledLog(t *testing.T) {
	h, dir := startHost(t), t.TempDir()
	s := openLeading(t, h, dir)
	off := enqueue(t, s, "a", "b", "c")
	s.DeliveredLocked(off["a"])
	s.SettleLocked(off["a"])
	s.SettleLocked(off["b"])
	s.TruncateLocked(off["c"], time.Minute)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for s.log.StartOffset() < off["c"] {
		select {
		case <-deadline:
			t.Fatalf("log start %d, want %d once the truncate is committed", s.log.StartOffset(), off["c"])
		case <-s.Changed():
		case <-time.After(TruncateEvery):
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openLeading(t, h, dir)
	defer s.Close()
	if got := unsettledOf(t, s); len(got) != 1 || got[0] != (unsettled{"c", false, 0}) {
		t.Fatalf("after the cut: %+v, want only c", got)
	}
}

// TestHandoutAndForwardsAcrossReplay: a handout waits until the deliver
// command before it is committed (proposing it if the flusher has not),
// a handout of a term a Replay ended fails rather than wait on commands
// dropped unproposed, and the messages of a forward are found by the
// next Replay, each under its index, whatever entries carried them.
func TestHandoutAndForwardsAcrossReplay(t *testing.T) {
	h, dir := startHost(t), t.TempDir()
	s := openLeading(t, h, dir)
	off := enqueue(t, s, "a")
	for _, i := range []int{0, 1, 3} { // 2: lost with a deposed leader, say
		if _, err := s.BufferLocked(queuestore.Message{Body: []byte("f")}, 1, ForwardedAs{ID: 42, Index: i}); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil { // one entry each
			t.Fatal(err)
		}
	}
	s.DeliveredLocked(off["a"])
	if err := s.HandoutLocked().Sync(); err != nil {
		t.Fatal(err)
	}
	if hw := s.HighWatermark(); hw < off["a"]+5 {
		t.Fatalf("high watermark %d after the handout's wait; the deliver command is at %d", hw, off["a"]+4)
	}

	s.mu.Lock()
	stale := Handout{sv: s.term, upTo: s.end + 1} // a command the Replay below drops unproposed
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Replay(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stale.Sync(); err == nil {
		t.Fatal("a handout of commands a Replay dropped unproposed succeeded")
	}
	fs := s.Forwards()
	if len(fs) != 1 || fs[0].ID != 42 {
		t.Fatalf("forwards found by Replay: %+v, want id 42", fs)
	}
	for i, want := range []bool{true, true, false, true, false} {
		if fs[0].Holds(i) != want {
			t.Errorf("the log holds message %d of forward 42: %v, want %v", i, !want, want)
		}
	}
	if age := time.Since(time.UnixMilli(fs[0].At)); age < 0 || age > time.Minute {
		t.Errorf("forward 42 taken %v ago, want when its messages were buffered", age)
	}
}

func TestSoleKeyReadsOnlyLoneRecords(t *testing.T) {
	for _, c := range []struct {
		name  string
		batch []byte
		key   string
		ok    bool
	}{
		{"enqueue", queuestore.EncodeMessage(queuestore.Message{Body: []byte("hello")}, 1), "", true},
		{"empty body", queuestore.EncodeMessage(queuestore.Message{}, 1), "", true},
		{"truncate", record.NewBatch(1, []record.Record{truncateCommand(7)}), "t", true},
		{"commands", record.NewBatch(1, []record.Record{deliverCommand(3), truncateCommand(3)}), "", false},
	} {
		h, err := record.ParseHeader(c.batch)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if key, ok := soleKey(h, c.batch); string(key) != c.key || ok != c.ok {
			t.Errorf("%s: soleKey = %q, %v; want %q, %v", c.name, key, ok, c.key, c.ok)
		}
	}
}

// TestHandoutCoversOnlyHandoutCommands: a handout waits for the deliver
// commands so far, and the settle right after one of a message handed
// out without acks, not for the enqueues and acks' settles handed to
// the store after them (a fresh proposal's commit a delivery does not
// need).
func TestHandoutCoversOnlyHandoutCommands(t *testing.T) {
	h, dir := startHost(t), t.TempDir()
	s := openLeading(t, h, dir)
	off := enqueue(t, s, "a", "b", "c")
	upTo := func() int64 { return s.HandoutLocked().upTo }
	s.DeliveredLocked(off["a"])
	afterDeliver := s.end
	enqueue(t, s, "d")
	s.SettleLocked(off["a"]) // an ack, later
	if got := upTo(); got != afterDeliver {
		t.Errorf("after deliver, enqueue, ack: handout up to %d, want %d (after the deliver command)", got, afterDeliver)
	}
	s.DeliveredLocked(off["b"])
	s.SettleLocked(off["b"]) // handed out without acks
	afterSettle := s.end
	s.NoteReturnLocked(off["c"], 1)
	if got := upTo(); got != afterSettle {
		t.Errorf("after a delivery without acks: handout up to %d, want %d (after its settle)", got, afterSettle)
	}
	if err := s.HandoutLocked().Sync(); err != nil {
		t.Fatal(err)
	}
	if hw := s.HighWatermark(); hw < afterSettle {
		t.Errorf("handout returned with the high watermark at %d, below %d", hw, afterSettle)
	}
}

// TestFlushProposesOneBatch: the messages and commands buffered between
// two flushes go to the group as one batch (one entry of its log), each
// message with its own enqueue time, and a truncate in a batch of its own.
func TestFlushProposesOneBatch(t *testing.T) {
	s := openLeading(t, startHost(t), t.TempDir())
	defer s.Close()
	at := map[string]int64{"a": 1000, "b": 1005, "c": 990}
	s.mu.Lock() // no flush in between
	var off []int64
	for _, body := range []string{"a", "b", "c"} {
		o, err := s.addMessageLocked(queuestore.Message{Body: []byte(body)}, at[body], ForwardedAs{})
		if err != nil {
			t.Fatal(err)
		}
		off = append(off, o)
		s.addCommandLocked(deliverCommand(o))
	}
	s.addCommandLocked(settleCommand(off[0]))
	s.mu.Unlock()
	s.TruncateLocked(off[1], time.Minute)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	var batches []int32 // records of each
	if err := s.walkBatches(0, func(h record.Header, _ []byte) (bool, error) {
		batches = append(batches, h.LastOffsetDelta+1)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(batches) != 2 || batches[0] != 7 || batches[1] != 1 {
		t.Fatalf("the log holds batches of %v records, want [7 1]: the flush's records, then the truncate", batches)
	}
	if err := s.Scan(0, func(_, ts int64, m queuestore.Message) bool {
		if want := at[string(m.Body)]; ts != want {
			t.Errorf("message %s enqueued at %d, want %d", m.Body, ts, want)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
}
