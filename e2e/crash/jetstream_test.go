package crash

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var jsPublishers = flag.Int("crash.js-publishers", 4, "concurrent JetStream publishers, each with its own connection")

// TestCrashJetStreamKeepsAckedPublishes kills the broker while JetStream
// publishers (nats.go PublishAsync, each message with a Nats-Msg-Id) run,
// restarts it, publishes every message whose acknowledgement never came
// again with the same id, and reads the stream back: every acknowledged
// message must be at its acknowledged sequence with its payload (lost =
// 0), and no id may be stored twice (duplicated = 0: the duplicate window
// is rebuilt from the log at start, so a retry of a message that reached
// the log before the kill is answered as a duplicate).
func TestCrashJetStreamKeepsAckedPublishes(t *testing.T) {
	h := newHarness(t)
	b := h.startWithNATS()
	const stream = "CRASH"
	js := connectJetStream(t, b.natsAddr)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: stream, Subjects: []string{"crash.>"}}); err != nil {
		t.Fatal(err)
	}
	acked := map[string]uint64{} // message id -> acknowledged sequence, over every cycle
	var published []string       // every id ever published, in no particular order
	totalAcked, totalRetried, totalRetriesDup := 0, 0, 0
	for cycle := 1; cycle <= *cycles; cycle++ {
		runFor := h.loadDuration(time.Second, 2*time.Second)
		ld := startJetStreamLoad(t, b.natsAddr, cycle, *jsPublishers)
		time.Sleep(runFor) // the load itself: how long the broker runs before the kill
		b.kill()
		res := ld.stop()
		if len(res.acked) == 0 {
			t.Fatalf("cycle %d: no publish was acknowledged in %v of load\n%s", cycle, runFor, b.logTail())
		}
		for id, seq := range res.acked {
			acked[id] = seq
		}
		published = append(published, res.published...)
		totalAcked += len(res.acked)

		restartAt := time.Now()
		b = h.startWithNATS()
		restart := time.Since(restartAt)
		js = connectJetStream(t, b.natsAddr)
		retried, dup := republishUnacked(t, js, res)
		totalRetried += retried
		totalRetriesDup += dup
		lost, duplicated, missing := checkStream(t, js, stream, acked, published)
		t.Logf("cycle %d: load %v, killed; %d acked (%d published); restart took %v; %d unacked published again, %d of them answered as duplicates; lost %d, duplicated %d, never stored %d",
			cycle, runFor.Round(time.Millisecond), len(res.acked), len(res.published), restart.Round(time.Millisecond), retried, dup, lost, duplicated, missing)
		if lost > 0 || duplicated > 0 || missing > 0 {
			t.Fatalf("cycle %d: acknowledged publishes damaged by the crash", cycle)
		}
	}
	b.stop()
	h.checkNoRaceReports()
	t.Logf("total over %d cycles: %d acknowledged publishes checked, lost 0, duplicated 0; %d unacknowledged ones published again, %d answered as duplicates",
		*cycles, totalAcked, totalRetried, totalRetriesDup)
}

// natsBroker is a broker with a NATS listener.
type natsBroker struct {
	*broker
	natsAddr string
}

// startWithNATS is harness.start with the NATS listener bound too.
func (h *harness) startWithNATS() *natsBroker {
	h.t.Helper()
	h.starts++
	logPath := filepath.Join(h.workDir, fmt.Sprintf("broker-%03d.log", h.starts))
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		h.t.Fatalf("open broker log: %v", err)
	}
	defer logFile.Close()
	addr, natsAddr := freeLoopbackAddr(h.t), freeLoopbackAddr(h.t)
	cmd := exec.Command(h.bin, "serve", "--data-dir", h.dataDir, "--kafka-addr", addr,
		"--amqp-addr=", "--http-addr=", "--nats-addr", natsAddr, "--log-level", "info")
	cmd.Env = environWithoutWharf()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start wharf: %v", err)
	}
	b := &broker{t: h.t, addr: addr, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		b.waitErr = cmd.Wait()
		close(b.exited)
	}()
	h.t.Cleanup(func() {
		if b.running() {
			_ = b.cmd.Process.Kill()
			<-b.exited
		}
	})
	deadline := time.Now().Add(readyTimeout)
	b.waitAccepting(addr, deadline)
	b.waitAccepting(natsAddr, deadline)
	h.brokers = append(h.brokers, b)
	return &natsBroker{broker: b, natsAddr: natsAddr}
}

func connectJetStream(t *testing.T, addr string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect("nats://"+addr, nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// jsLoad is the publishers of one cycle.
type jsLoad struct {
	stopOnce sync.Once
	done     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	res      jsLoadResult
}

type jsLoadResult struct {
	acked     map[string]uint64 // id -> sequence
	published []string          // every id sent
}

// startJetStreamLoad runs publishers, each publishing asynchronously (at
// most 256 unacknowledged) ids "c<cycle>-p<i>-<n>" with the id as the
// payload, until stop.
func startJetStreamLoad(t *testing.T, addr string, cycle, publishers int) *jsLoad {
	ld := &jsLoad{done: make(chan struct{}), res: jsLoadResult{acked: map[string]uint64{}}}
	for p := range publishers {
		nc, err := nats.Connect("nats://"+addr, nats.NoReconnect())
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
		if err != nil {
			t.Fatal(err)
		}
		ld.wg.Add(1)
		go func() {
			defer ld.wg.Done()
			defer nc.Close()
			ld.publish(js, fmt.Sprintf("c%d-p%d-", cycle, p))
		}()
	}
	return ld
}

func (ld *jsLoad) publish(js jetstream.JetStream, prefix string) {
	var futures sync.WaitGroup
	defer futures.Wait()
	for n := 0; ; n++ {
		select {
		case <-ld.done:
			return
		default:
		}
		id := prefix + fmt.Sprint(n)
		f, err := js.PublishAsync("crash."+prefix[:len(prefix)-1], []byte(id), jetstream.WithMsgID(id))
		if err != nil {
			return // the broker is gone
		}
		ld.mu.Lock()
		ld.res.published = append(ld.res.published, id)
		ld.mu.Unlock()
		futures.Add(1)
		go func() {
			defer futures.Done()
			select {
			case ack := <-f.Ok():
				ld.mu.Lock()
				ld.res.acked[id] = ack.Sequence
				ld.mu.Unlock()
			case <-f.Err():
			case <-time.After(10 * time.Second):
			}
		}()
	}
}

// stop ends the publishers (the broker was killed: their connections are
// gone) and returns what they did.
func (ld *jsLoad) stop() jsLoadResult {
	ld.stopOnce.Do(func() { close(ld.done) })
	ld.wg.Wait()
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.res
}

// republishUnacked publishes every id of res that was not acknowledged
// again, with the same id, and counts those answered as duplicates.
func republishUnacked(t *testing.T, js jetstream.JetStream, res jsLoadResult) (retried, duplicates int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, id := range res.published {
		if _, ok := res.acked[id]; ok {
			continue
		}
		subject := "crash." + id[:lastDash(id)]
		ack, err := js.Publish(ctx, subject, []byte(id), jetstream.WithMsgID(id))
		if err != nil {
			t.Fatalf("publish %s again after the restart: %v", id, err)
		}
		retried++
		if ack.Duplicate {
			duplicates++
		}
		res.acked[id] = ack.Sequence
	}
	return retried, duplicates
}

func lastDash(id string) int {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '-' {
			return i
		}
	}
	return len(id)
}

// checkStream reads the whole stream and counts acknowledged ids not at
// their sequence (lost), ids stored more than once (duplicated), and ids
// published that are nowhere (missing: a retry must have stored them).
func checkStream(t *testing.T, js jetstream.JetStream, stream string, acked map[string]uint64, published []string) (lost, duplicated, missing int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	last := info.CachedInfo().State.LastSeq
	seen := map[string]int{}
	bySeq := map[uint64]string{}
	for len(bySeq) < int(info.CachedInfo().State.Msgs) {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			seen[string(m.Data())]++
			bySeq[md.Sequence.Stream] = string(m.Data())
			n++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	for id, seq := range acked {
		if seq > last || bySeq[seq] != id {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged %s at sequence %d; the stream holds %q there (last sequence %d)", id, seq, bySeq[seq], last)
			}
		}
	}
	for id, n := range seen {
		if n > 1 {
			duplicated++
			if duplicated <= 5 {
				t.Errorf("%s stored %d times", id, n)
			}
		}
	}
	for _, id := range published {
		if seen[id] == 0 {
			missing++
		}
	}
	return lost, duplicated, missing
}
