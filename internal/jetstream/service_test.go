package jetstream

import (
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/kvtest"
	"github.com/wharf-mq/wharf/internal/replica"
)

// localLogs is a LogStore of plain local logs, one directory per stream.
type localLogs struct {
	dir string
	mu  sync.Mutex
	// open logs, closed by the test's cleanup
	logs map[string]*replica.Local
	// synced is each log's end at its last successful Sync: what a crash
	// keeps (crash cuts every log there).
	synced map[string]int64
}

func (l *localLogs) CreateLog(stream string) (StreamLog, error) { return l.OpenLog(stream) }

func (l *localLogs) OpenLog(stream string) (StreamLog, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lg := l.logs[stream]; lg != nil {
		return localLog{lg, l, stream}, nil
	}
	lg, err := replica.Open(filepath.Join(l.dir, stream), replica.DefaultConfig(), replica.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	l.logs[stream] = lg
	if l.synced == nil {
		l.synced = map[string]int64{}
	}
	l.synced[stream] = lg.EndOffset() // what it opens with is on disk
	return localLog{lg, l, stream}, nil
}

func (l *localLogs) DeleteLog(stream string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lg := l.logs[stream]; lg != nil {
		delete(l.logs, stream)
		return lg.Delete()
	}
	return nil
}

func (l *localLogs) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, lg := range l.logs {
		lg.Close()
		delete(l.logs, name)
	}
}

// crash cuts every log at its end when it was last synced, as a power
// failure would, before the logs are closed.
func (l *localLogs) crash() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, lg := range l.logs {
		if err := lg.TruncateTo(l.synced[name]); err != nil {
			panic(err)
		}
	}
}

type localLog struct {
	*replica.Local
	logs *localLogs
	name string
}

func (l localLog) Sync() error {
	end := l.EndOffset()
	if err := l.Local.Sync(); err != nil {
		return err
	}
	l.logs.mu.Lock()
	defer l.logs.mu.Unlock()
	l.logs.synced[l.name] = max(l.logs.synced[l.name], end)
	return nil
}

func (l localLog) Append(batch []byte) (int64, error) {
	a, err := l.Local.Append(batch, replica.AppendOptions{})
	return a.BaseOffset, err
}

func (l localLog) DeleteBefore(offset int64) error {
	_, err := l.Local.DeleteBefore(offset)
	return err
}

func (l localLog) OffsetForTime(ms int64) (int64, bool, error) {
	off, _, found, err := l.Local.OffsetForTime(ms)
	return off, found, err
}

// testNode is a Service on a data directory that a test can reopen, as a
// node restart would.
type testNode struct {
	t     *testing.T
	dir   string
	defs  *kvtest.Mem
	logs  *localLogs
	state replica.Log
	svc   *Service
	out   *recordingOutbox
}

func newTestNode(t *testing.T) *testNode {
	n := &testNode{t: t, dir: t.TempDir(), defs: kvtest.New()}
	n.open()
	t.Cleanup(n.close)
	return n
}

func (n *testNode) open() {
	n.t.Helper()
	n.load()
	n.out = &recordingOutbox{}
	n.svc.Start(n.out, func(string, *StreamConfig) {})
}

// load opens the service without starting it.
func (n *testNode) load() {
	n.t.Helper()
	n.logs = &localLogs{dir: filepath.Join(n.dir, "streams"), logs: map[string]*replica.Local{}}
	var err error
	if n.state, err = OpenStateLog(filepath.Join(n.dir, "state"), slog.New(slog.DiscardHandler)); err != nil {
		n.t.Fatal(err)
	}
	n.svc, err = Open(Config{Logs: n.logs, Definitions: n.defs, State: n.state})
	if err != nil {
		n.t.Fatal(err)
	}
}

func (n *testNode) close() {
	if n.svc == nil {
		return
	}
	if err := n.svc.Close(); err != nil {
		n.t.Error(err)
	}
	n.state.Close()
	n.logs.closeAll()
	n.svc = nil
}

func (n *testNode) restart() {
	n.close()
	n.open()
}

// crashRestart stops the service, loses what the streams' logs had not
// synced, as a crash would (the state log keeps what the service wrote),
// and opens it again.
func (n *testNode) crashRestart() {
	n.svc.Close()
	n.logs.crash()
	n.state.Close()
	n.logs.closeAll()
	n.open()
}

// publish stores a message and waits for its acknowledgement.
func (n *testNode) publish(stream, subject, data string, header []byte) PubAck {
	n.t.Helper()
	done := make(chan struct{})
	var ack PubAck
	var aerr *APIError
	n.svc.Publish(stream, subject, header, []byte(data), func(a PubAck, err *APIError) {
		ack, aerr = a, err
		close(done)
	})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		n.t.Fatal("no publish acknowledgement within 10 s")
	}
	if aerr != nil {
		n.t.Fatalf("publish to %s: %v", subject, aerr)
	}
	return ack
}

// recordingOutbox takes every message sent to subscribers of "inbox.>"
// and "deliver.>".
type recordingOutbox struct {
	mu   sync.Mutex
	sent map[string][]*OutMessage
	cond *sync.Cond
}

func (o *recordingOutbox) Send(to string, m *OutMessage) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sent == nil {
		o.sent = map[string][]*OutMessage{}
	}
	o.sent[to] = append(o.sent[to], m)
	return true
}

func (o *recordingOutbox) Interest(string) bool { return true }

// waitFor returns the messages sent to to once there are n.
func (o *recordingOutbox) waitFor(t *testing.T, to string, n int) []*OutMessage {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o.mu.Lock()
		got := o.sent[to]
		o.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages sent to %s, want %d", len(got), to, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConsumerStateSurvivesRestart(t *testing.T) {
	n := newTestNode(t)
	if _, err := n.svc.CreateStream(StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		n.publish("S", "s.x", v, nil)
	}
	if _, err := n.svc.CreateConsumer("S", ConsumerConfig{Durable: "d", AckPolicy: AckExplicit}, ActionCreateOrUpdate); err != nil {
		t.Fatal(err)
	}
	n.svc.Next("S", "d", "inbox.1", NextRequest{Batch: 2})
	n.out.waitFor(t, "inbox.1", 2)
	n.svc.Ack("S", "d", 1, 1, AckAck, 0)
	before, _ := n.svc.ConsumerInfo("S", "d")
	n.restart()
	after, err := n.svc.ConsumerInfo("S", "d")
	if err != nil {
		t.Fatal(err)
	}
	if after.Delivered.Consumer != before.Delivered.Consumer || after.AckFloor != before.AckFloor ||
		after.NumAckPending != before.NumAckPending || after.NumPending != before.NumPending {
		t.Errorf("before %+v %+v %d %d, after %+v %+v %d %d", before.Delivered, before.AckFloor, before.NumAckPending, before.NumPending,
			after.Delivered, after.AckFloor, after.NumAckPending, after.NumPending)
	}
}

// publishUnacknowledged stores a message nobody waits to see acknowledged
// (a publish without a reply subject): nothing syncs the log for it.
func (n *testNode) publishUnacknowledged(stream, subject, data string) {
	n.svc.Publish(stream, subject, nil, []byte(data), nil)
}

// State written about a message (an acknowledgement, a deletion) must not
// outlive the message in a crash: the sequence would be given to the next
// message, which the consumer's position or the deletion would then skip,
// although its publisher had its acknowledgement.
func TestStateNeverCoversMessagesACrashLoses(t *testing.T) {
	t.Run("acknowledgement", func(t *testing.T) {
		n := newTestNode(t)
		if _, err := n.svc.CreateStream(StreamConfig{Name: "S", Subjects: []string{"s.>"}, Retention: WorkQueuePolicy}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.svc.CreateConsumer("S", ConsumerConfig{Durable: "d", AckPolicy: AckExplicit}, ActionCreateOrUpdate); err != nil {
			t.Fatal(err)
		}
		n.publishUnacknowledged("S", "s.x", "a")
		n.svc.Next("S", "d", "inbox.1", NextRequest{Batch: 1})
		n.out.waitFor(t, "inbox.1", 1)
		n.svc.Ack("S", "d", 1, 1, AckAck, 0)
		n.crashRestart()

		ack := n.publish("S", "s.x", "b", nil)
		n.svc.Next("S", "d", "inbox.2", NextRequest{Batch: 1})
		if got := n.out.waitFor(t, "inbox.2", 1); string(got[0].Data) != "b" {
			t.Errorf("after the crash the consumer got %q, want b (acknowledged as %+v)", got[0].Data, ack)
		}
	})
	t.Run("deletion", func(t *testing.T) {
		n := newTestNode(t)
		if _, err := n.svc.CreateStream(StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
			t.Fatal(err)
		}
		n.publishUnacknowledged("S", "s.x", "a")
		if err := n.svc.DeleteMsg("S", 1); err != nil {
			t.Fatal(err)
		}
		n.crashRestart()

		ack := n.publish("S", "s.x", "b", nil)
		n.restart()
		if m, err := n.svc.GetMsg("S", MsgRequest{Seq: ack.Seq}); err != nil || string(m.Data) != "b" {
			t.Errorf("message b, acknowledged as %+v, after a restart: %v %v", ack, m, err)
		}
	})
}

// A pull request may arrive while the service starts (the front end
// serves the API before it starts the service): what it answers must not
// race with Start setting the Outbox.
func TestNextDuringStart(t *testing.T) {
	n := &testNode{t: t, dir: t.TempDir(), defs: kvtest.New()}
	n.load()
	t.Cleanup(n.close)
	if _, err := n.svc.CreateStream(StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.svc.CreateConsumer("S", ConsumerConfig{Durable: "d", AckPolicy: AckExplicit}, ActionCreate); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	go func() {
		defer close(started)
		n.out = &recordingOutbox{}
		n.svc.Start(n.out, func(string, *StreamConfig) {})
	}()
	n.svc.Next("S", "d", "inbox.1", NextRequest{Batch: 1, NoWait: true}) // refused: 404 No Messages
	<-started
}
