package reliability

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// amqpConfirm is one message whose publish was confirmed (basic.ack).
type amqpConfirm struct {
	id    string
	queue string
}

// amqpLoad is confirm-mode publishers sending persistent messages to
// durable queues (round robin) until stopped.
type amqpLoad struct {
	gate   ackGate
	queues []string
	cancel context.CancelFunc
	loops  sync.WaitGroup

	mu        sync.Mutex
	confirmed []amqpConfirm
	published map[string]string // id -> queue, every message handed to the client
	nacked    int
	blocked   int // connection.blocked notifications
	failures  map[string]int
}

// amqpWindow bounds a publisher's unconfirmed messages.
const amqpWindow = 128

func amqpID(publisher int, seq int) string { return fmt.Sprintf("a%d-s%d", publisher, seq) }

// declareQueues declares durable queues.
func declareQueues(t *testing.T, url string, queues ...string) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("amqp dial: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("amqp channel: %v", err)
	}
	for _, q := range queues {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatalf("declare %s: %v", q, err)
		}
	}
}

// startAMQPLoad starts n publishers at up to rate messages per second each
// (0: unlimited).
func startAMQPLoad(t *testing.T, url string, queues []string, n, rate int, gate ackGate) *amqpLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ld := &amqpLoad{gate: gate, queues: queues, cancel: cancel, published: map[string]string{}, failures: map[string]int{}}
	for p := range n {
		conn, err := amqp.Dial(url)
		if err != nil {
			cancel()
			t.Fatalf("amqp dial: %v", err)
		}
		ld.loops.Add(1)
		go ld.publish(ctx, conn, p, rate)
	}
	return ld
}

func (ld *amqpLoad) fail(err error) {
	ld.mu.Lock()
	ld.failures[err.Error()]++
	ld.mu.Unlock()
}

// inFlight is a published message waiting for its confirm.
type inFlight struct {
	dc    *amqp.DeferredConfirmation
	id, q string
}

// publish is one publisher's loop. A settler goroutine takes the confirms
// in publish order as they arrive; at most amqpWindow messages are
// unconfirmed at a time.
func (ld *amqpLoad) publish(ctx context.Context, conn *amqp.Connection, publisher, rate int) {
	defer ld.loops.Done()
	defer conn.Close()
	blocked := conn.NotifyBlocked(make(chan amqp.Blocking, 16))
	go func() { // ends when conn closes (the library closes the channel)
		for b := range blocked {
			if b.Active {
				ld.mu.Lock()
				ld.blocked++
				ld.mu.Unlock()
			}
		}
	}()
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		ld.fail(err)
		return
	}
	pending := make(chan inFlight, amqpWindow)
	settled := make(chan struct{})
	go ld.settle(ctx, pending, settled)
	defer func() {
		close(pending)
		<-settled
	}()

	perTick, left := 1<<30, 1<<30
	var tick <-chan time.Time
	if rate > 0 {
		tk := time.NewTicker(loadTick)
		defer tk.Stop()
		tick = tk.C
		perTick = max(1, rate*int(loadTick)/int(time.Second))
		left = perTick
	}
	for seq := 0; ctx.Err() == nil; seq++ {
		if left == 0 {
			select {
			case <-ctx.Done():
				continue
			case <-tick:
				left = perTick
			}
		}
		left--
		id := amqpID(publisher, seq)
		q := ld.queues[seq%len(ld.queues)]
		ld.mu.Lock()
		ld.published[id] = q
		ld.mu.Unlock()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp.Publishing{
			MessageId:    id,
			DeliveryMode: amqp.Persistent,
			Body:         []byte(id),
		})
		if err != nil {
			if ctx.Err() == nil {
				ld.fail(err)
			}
			return
		}
		select {
		case pending <- inFlight{dc, id, q}:
		case <-ctx.Done():
			return
		}
	}
}

// settle records each confirm in publish order until pending is closed.
// Once ctx ends, the confirms still due get 5 s in all: after a power cut
// the node still runs and confirms them; on a full disk they may never
// come.
func (ld *amqpLoad) settle(ctx context.Context, pending <-chan inFlight, done chan<- struct{}) {
	defer close(done)
	wait, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(5*time.Second, cancel) })
	defer stop()
	for f := range pending {
		ok, err := f.dc.WaitContext(wait)
		switch {
		case err != nil:
			ld.fail(errors.New("no confirm within 5 s of stopping"))
		case !ok:
			ld.mu.Lock()
			ld.nacked++
			ld.mu.Unlock()
		default:
			ld.gate.Ack(func() {
				ld.mu.Lock()
				ld.confirmed = append(ld.confirmed, amqpConfirm{id: f.id, queue: f.q})
				ld.mu.Unlock()
			})
		}
	}
}

// stop ends the publishers, after collecting their outstanding confirms.
func (ld *amqpLoad) stop() {
	ld.cancel()
	ld.loops.Wait()
}

func (ld *amqpLoad) summary() string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	keys := make([]string, 0, len(ld.failures))
	for k := range ld.failures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "published=%d confirmed(counted)=%d nacked=%d blocked notifications=%d", len(ld.published), len(ld.confirmed), ld.nacked, ld.blocked)
	for _, k := range keys {
		fmt.Fprintf(&b, "; %dx %q", ld.failures[k], k)
	}
	return b.String()
}

// amqpDelivery is one drained message.
type amqpDelivery struct {
	queue, id, body string
	persistent      bool
}

// drainQueues consumes every ready message of each queue (auto-ack) and
// returns them in delivery order per queue.
func drainQueues(t *testing.T, url string, queues []string) map[string][]amqpDelivery {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("amqp dial: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("amqp channel: %v", err)
	}
	out := map[string][]amqpDelivery{}
	for _, q := range queues {
		info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("queue %s after restart: %v", q, err)
		}
		if info.Messages == 0 {
			continue
		}
		msgs, err := ch.Consume(q, "drain-"+q, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("consume %s: %v", q, err)
		}
		deadline := time.NewTimer(30 * time.Second)
		for len(out[q]) < info.Messages {
			select {
			case d, ok := <-msgs:
				if !ok {
					t.Fatalf("consume %s: delivery channel closed after %d of %d", q, len(out[q]), info.Messages)
				}
				out[q] = append(out[q], amqpDelivery{queue: q, id: d.MessageId, body: string(d.Body), persistent: d.DeliveryMode == amqp.Persistent})
			case <-deadline.C:
				t.Fatalf("drain %s: %d of %d messages within 30s", q, len(out[q]), info.Messages)
			}
		}
		deadline.Stop()
		if err := ch.Cancel("drain-"+q, false); err != nil && !errors.Is(err, amqp.ErrClosed) {
			t.Fatalf("cancel drain of %s: %v", q, err)
		}
	}
	return out
}

// checkAMQP compares confirmed messages with what the queues held.
func checkAMQP(rep *reporter, ld *amqpLoad, got map[string][]amqpDelivery) tally {
	var c tally
	delivered := map[string]int{}
	confirmed := map[string]bool{}
	for _, q := range ld.queues {
		lastSeq := map[int]int{}
		for _, d := range got[q] {
			wantQ, published := ld.published[d.id]
			if !published || wantQ != q || d.body != d.id || !d.persistent {
				c.unexpected++
				rep.report("unexpected", "queue %s delivered id %q body %q persistent %v (published to %q: %v)", q, d.id, d.body, d.persistent, wantQ, published)
				continue
			}
			if delivered[d.id]++; delivered[d.id] > 1 {
				c.duplicated++
				rep.report("duplicated", "%q delivered again from %s", d.id, q)
				continue
			}
			var p, seq int
			fmt.Sscanf(d.id, "a%d-s%d", &p, &seq)
			if prev, ok := lastSeq[p]; ok && seq < prev {
				c.outOfOrder++
				rep.report("out-of-order", "queue %s: %q after seq %d of the same publisher", q, d.id, prev)
			}
			lastSeq[p] = seq
		}
	}
	for _, m := range ld.confirmed {
		c.checked++
		confirmed[m.id] = true
		if delivered[m.id] == 0 {
			c.lost++
			rep.report("lost", "%q confirmed to %s, not delivered", m.id, m.queue)
		}
	}
	for id := range delivered {
		if !confirmed[id] {
			c.survivors++
		}
	}
	return c
}
