package reliability

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/nodetest"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// Shape of the AMQP power-loss load with consumers.
const (
	// slowQueueFsync is how long every fsync of a queue's messages log
	// takes (a slow disk): messages stay unsynced that long after their
	// consumers acked them.
	slowQueueFsync = 150 * time.Millisecond
	// lowFileLimit keeps so few segment files open that the file cache
	// closes, and so fsyncs, settlement logs soon after every write.
	lowFileLimit = 2
	// freshPerQueue is how many confirmed messages each queue gets on the
	// cut copy, between its first and second start.
	freshPerQueue = 100
	// freshPublisher numbers those messages' ids (amqpID).
	freshPublisher = 9
)

// The publishers send to all three queues in turn; consumers ack the first
// two as fast as messages come (settling them while they are still
// unsynced); the third keeps its messages, so the first start of a copy
// has confirmed messages to check.
var (
	consumedQueues = []string{"power-c0", "power-c1"}
	keptQueue      = "power-k0"
)

// TestPowerLossNodeAMQPConsumers cuts the power under a node while
// amqp091-go publishers (confirm mode, persistent messages) and consumers
// (manual acks) use three durable queues, two of them consumed, on a slow
// disk (every fsync of a queue's messages log takes slowQueueFsync) with
// few files open at once (so the file cache fsyncs settlement logs soon
// after they are written). The cut comes at the worst moment the test can
// find: the first at which some queue's durable settlements name an offset
// its durable messages log does not hold (queueLogWatch), or after loadFor
// if there is none. Each cut copy is started twice:
//
//   - first start: every confirmed message that no consumer acked before
//     the cut is delivered (those acked may come back: their settlement
//     may have been lost); then freshPerQueue more confirmed messages are
//     published to each queue and the node is stopped cleanly;
//   - second start: every one of those is delivered, and nothing drained
//     at the first start comes back.
//
// The second start catches settlements that outlive their messages: made
// durable for offsets the cut took from the messages log, they would
// settle the fresh messages, which get those offsets.
func TestPowerLossNodeAMQPConsumers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs whole nodes under load; skipped with -short")
	}
	rng := newRand(t)
	work := workDir(t)
	totals := map[string]tally{}
	for cut := 1; cut <= *brokerCutsFlag; cut++ {
		dir := filepath.Join(work, fmt.Sprintf("consumers-cut-%03d", cut))
		loadFor := time.Duration(1000+rng.IntN(1000)) * time.Millisecond
		ld, acks, stats, when := runConsumedAMQPLoad(t, dir, loadFor)
		t.Logf("cut %d %s: %s; amqp: %s; %d acked by consumers before the cut", cut, when, stats, ld.summary(), acks.count())
		if len(ld.confirmed) == 0 || acks.count() == 0 {
			t.Fatalf("cut %d: nothing confirmed or acked before the cut (confirmed %d, acked %d)", cut, len(ld.confirmed), acks.count())
		}
		for _, v := range variants {
			where := fmt.Sprintf("cut %d %s", cut, v)
			first, second := checkConsumedCopy(t, filepath.Join(dir, v), where, ld, acks)
			totals[v+" first start"] = totals[v+" first start"].add(first)
			totals[v+" second start"] = totals[v+" second start"].add(second)
			t.Logf("%s: first start %s", where, first)
			t.Logf("%s: second start %s", where, second)
		}
		if t.Failed() {
			t.Fatalf("cut %d: confirmed messages lost; copies in %s", cut, dir)
		}
	}
	for _, v := range variants {
		for _, start := range []string{"first start", "second start"} {
			t.Logf("total over %d cuts, %s, %s: %s", *brokerCutsFlag, v, start, totals[v+" "+start])
		}
	}
}

// runConsumedAMQPLoad runs a node on dir/live under publishers and acking
// consumers on a slow disk with few files open and cuts the power at the
// first moment a queue's durable settlements name an offset its durable
// messages log does not hold (after a warm-up; at the latest after
// loadFor); then it stops the load and the node. when says which moment
// it was. That any such moment came is an error in itself.
func runConsumedAMQPLoad(t *testing.T, dir string, loadFor time.Duration) (ld *amqpLoad, acks *amqpAckers, stats cutStats, when string) {
	t.Helper()
	live := filepath.Join(dir, "live")
	pc := startPowerCut(t, live)
	defer pc.stop()
	watch := watchQueueLogs(pc, slowQueueFsync)
	defer watch.restore()
	defer seglog.SetMaxOpenFiles(seglog.SetMaxOpenFiles(lowFileLimit))
	logs := newNodeLog(t, slog.LevelWarn)
	n := nodetest.Start(t, nodetest.WithDataDir(live), logs.option())
	url := nodetest.AMQPURL(n)
	queues := append(slices.Clone(consumedQueues), keptQueue)
	declareQueues(t, url, queues...)
	acks = startAckers(t, url, consumedQueues, pc)
	ld = startAMQPLoad(t, url, queues, powerPublishers, powerAMQPRate, pc)
	start := time.Now()
	time.Sleep(loadFor / 2) // warm-up, part of the load: confirms and acks under way
	watch.arm()
	select {
	case queue := <-watch.stale:
		when = fmt.Sprintf("after %v, when the settlements of %s outran its messages log", time.Since(start).Round(time.Millisecond), filepath.Base(queue))
	case <-time.After(loadFor - loadFor/2):
		when = fmt.Sprintf("after %v", loadFor)
	}
	stats, err := pc.Cut(filepath.Join(dir, "truncated"), filepath.Join(dir, "zeroed"))
	if err != nil {
		t.Fatalf("cut: %v", err)
	}
	if n := watch.staleMoments(); n > 0 {
		// What the cut copies then show as lost messages, whenever the
		// cut came.
		t.Errorf("%d times during the load a queue's durable settlements named offsets its durable messages log did not hold", n)
	}
	ld.stop()
	if err := acks.stop(); err != nil {
		t.Errorf("consumers: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Errorf("close the live node: %v", err)
	}
	return ld, acks, stats, when
}

// queueLogWatch wraps a powerCut's fsync hook for durable queues' logs.
// Every fsync of a messages log takes longer (a slow disk: its caller
// waits, and its bytes count as durable only once it is over). After each
// fsync of a queue's segment file it reads, from the bytes fsyncs made
// durable, where the queue's messages log ends and the highest offset its
// settlement records name: a settlement at or past that end is what a
// power cut must never find, since the offset would go to the next
// message published. Once armed, the first such moment is sent on stale.
type queueLogWatch struct {
	restore func() // puts the powerCut's own hook back
	stale   chan string

	mu      sync.Mutex
	armed   bool
	durable map[string]int64 // queue segment file -> bytes made durable
	moments int              // fsyncs after which some settlement was ahead
}

func watchQueueLogs(pc *powerCut, slow time.Duration) *queueLogWatch {
	w := &queueLogWatch{stale: make(chan string, 1), durable: map[string]int64{}}
	queues := filepath.Join(pc.root, "queues")
	w.restore = seglog.SetSyncHook(func(f seglog.SyncedFile) {
		logDir := filepath.Dir(f.Path)
		queueDir := filepath.Dir(logDir)
		if filepath.Dir(queueDir) != queues {
			pc.onSync(f)
			return
		}
		if filepath.Base(logDir) == "messages" {
			time.Sleep(slow)
		}
		pc.onSync(f)
		if filepath.Ext(f.Path) == ".log" {
			w.synced(queueDir, f.Path, f.Stat.Size())
		}
	})
	return w
}

func (w *queueLogWatch) arm() {
	w.mu.Lock()
	w.armed = true
	w.mu.Unlock()
}

func (w *queueLogWatch) staleMoments() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.moments
}

// synced records that size bytes of path, a segment file of the queue in
// queueDir, are durable, and checks the queue.
func (w *queueLogWatch) synced(queueDir, path string, size int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.durable[path] = max(w.durable[path], size)
	end := w.durableEnd(filepath.Join(queueDir, "messages"), func(r record.Record, off int64) int64 { return off + 1 })
	settled := w.durableEnd(filepath.Join(queueDir, "settled"), settledThrough)
	if settled <= end {
		return
	}
	w.moments++
	if w.armed {
		select {
		case w.stale <- queueDir:
		default:
		}
	}
}

// durableEnd reads the durable bytes of each segment file of the log in
// dir and returns the highest value of through over its records. Caller
// holds mu.
func (w *queueLogWatch) durableEnd(dir string, through func(r record.Record, off int64) int64) int64 {
	end := int64(0)
	for path, size := range w.durable {
		if filepath.Dir(path) != dir {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			continue // deleted: nothing of it can be found after a cut either
		}
		data = data[:min(int64(len(data)), size)]
		for len(data) > 0 {
			h, err := record.ParseHeader(data)
			if err != nil {
				break // the last batch's tail was not durable
			}
			recs, err := record.Records(data[:h.Size()])
			if err != nil {
				break
			}
			for i, r := range recs {
				end = max(end, through(r, h.BaseOffset+int64(i)))
			}
			data = data[h.Size():]
		}
	}
	return end
}

// settledThrough is one past the highest message offset a record of a
// queue's settlement log names (internal/mq/store_codec.go's layout:
// key "s", uvarint pairs of the gap from the previous run's end and the
// run's length; key "d", uvarint pairs of the offset's distance from the
// previous one and a delivery count).
func settledThrough(r record.Record, _ int64) int64 {
	through, prev := int64(0), int64(0)
	for b := r.Value; len(b) > 0; {
		first, n := binary.Uvarint(b)
		if n <= 0 {
			break
		}
		second, m := binary.Uvarint(b[n:])
		if m <= 0 {
			break
		}
		b = b[n+m:]
		switch string(r.Key) {
		case "s":
			prev += int64(first) + int64(second) // the end of this run
			through = prev
		case "d":
			prev += int64(first) // this count's offset
			through = prev + 1
		}
	}
	return through
}

// checkConsumedCopy starts a node on a cut copy twice (see
// TestPowerLossNodeAMQPConsumers) and checks both starts.
func checkConsumedCopy(t *testing.T, dir, where string, ld *amqpLoad, acks *amqpAckers) (first, second tally) {
	t.Helper()
	// First start: what was confirmed and not acked before the cut.
	unacked := &amqpLoad{queues: ld.queues, published: ld.published}
	for _, m := range ld.confirmed {
		if !acks.acked(m.id) {
			unacked.confirmed = append(unacked.confirmed, m)
		}
	}
	fresh := &amqpLoad{queues: ld.queues, published: map[string]string{}}
	withNode(t, dir, where+" first start", func(url string) {
		first = checkAMQP(newReporter(t, where+" first start"), unacked, drainQueues(t, url, ld.queues))
		publishConfirmed(t, url, fresh, freshPublisher, freshPerQueue)
	})
	// Second start: the fresh messages, and nothing drained at the first.
	withNode(t, dir, where+" second start", func(url string) {
		second = checkAMQP(newReporter(t, where+" second start"), fresh, drainQueues(t, url, ld.queues))
	})
	return first, second
}

// withNode starts a node on dir, runs fn with its AMQP URL and stops the
// node cleanly.
func withNode(t *testing.T, dir, where string, fn func(url string)) {
	t.Helper()
	logs := newNodeLog(t, slog.LevelWarn)
	n := nodetest.Start(t, nodetest.WithDataDir(dir), logs.option())
	fn(nodetest.AMQPURL(n))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Errorf("%s: close: %v", where, err)
	}
}

// publishConfirmed publishes perQueue persistent messages to each of ld's
// queues in confirm mode, one at a time, with the ids of publisher
// (amqpID), and records them in ld as published and confirmed.
func publishConfirmed(t *testing.T, url string, ld *amqpLoad, publisher, perQueue int) {
	t.Helper()
	conn, ch := dialChannel(t, url)
	defer conn.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("confirm channel: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for seq := range perQueue * len(ld.queues) {
		id, q := amqpID(publisher, seq), ld.queues[seq%len(ld.queues)]
		ld.published[id] = q
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp.Publishing{
			MessageId: id, DeliveryMode: amqp.Persistent, Body: []byte(id),
		})
		if err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			t.Fatalf("confirm of %s: ack %v, %v", id, ok, err)
		}
		ld.confirmed = append(ld.confirmed, amqpConfirm{id: id, queue: q})
	}
}

// dialChannel opens a connection to url and a channel on it. The
// connection is closed when the test ends, if not before.
func dialChannel(t *testing.T, url string) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("amqp dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("amqp channel: %v", err)
	}
	return conn, ch
}

// amqpAckers consume queues with manual acks. Each message is recorded as
// acked, through the gate, before its ack is sent: one acked before the
// cut may be gone from the cut copy, any other must be there. After the
// cut nothing more is acked.
type amqpAckers struct {
	gate  ackGate
	conn  *amqp.Connection
	loops sync.WaitGroup

	mu    sync.Mutex
	ids   map[string]bool // acked before the cut
	fails []error
}

// ackerPrefetch bounds each consumer's unacknowledged deliveries.
const ackerPrefetch = 64

func startAckers(t *testing.T, url string, queues []string, gate ackGate) *amqpAckers {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("amqp dial: %v", err)
	}
	a := &amqpAckers{gate: gate, conn: conn, ids: map[string]bool{}}
	for _, q := range queues {
		ch, err := conn.Channel()
		if err == nil {
			err = ch.Qos(ackerPrefetch, 0, false)
		}
		var msgs <-chan amqp.Delivery
		if err == nil {
			msgs, err = ch.Consume(q, "acker-"+q, false, false, false, false, nil)
		}
		if err != nil {
			conn.Close()
			t.Fatalf("consume %s: %v", q, err)
		}
		a.loops.Add(1)
		go a.ack(msgs)
	}
	return a
}

// ack is one consumer's loop; it ends when the connection closes.
func (a *amqpAckers) ack(msgs <-chan amqp.Delivery) {
	defer a.loops.Done()
	for d := range msgs {
		if !a.gate.Ack(func() {
			a.mu.Lock()
			a.ids[d.MessageId] = true
			a.mu.Unlock()
		}) {
			continue // after the cut: left unacknowledged
		}
		if err := d.Ack(false); err != nil && !errors.Is(err, amqp.ErrClosed) {
			a.mu.Lock()
			a.fails = append(a.fails, err)
			a.mu.Unlock()
		}
	}
}

// stop closes the consumers' connection and returns the acks that failed.
func (a *amqpAckers) stop() error {
	a.conn.Close()
	a.loops.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(a.fails...)
}

func (a *amqpAckers) acked(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids[id]
}

func (a *amqpAckers) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ids)
}
