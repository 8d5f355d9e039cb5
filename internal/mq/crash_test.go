package mq

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/queuestore"
	"github.com/wharf-mq/wharf/internal/record"
)

// damagedQueueEnv is an env with the durable queues "bad" and "good",
// n persistent messages each, of which the first settled of "bad" were
// taken, stopped cleanly; the scrubber is left to the test (ScrubInterval
// -1).
func damagedQueueEnv(t *testing.T, n, settled int) (e *env, bad *queue) {
	t.Helper()
	e = newEnv(t, func(c *Config) { c.ScrubInterval = -1 })
	for _, name := range []string{"bad", "good"} {
		e.declareQueue(name, true)
		var last PublishResult
		for i := range n {
			last = e.publish(persistent("", name, fmt.Sprint(name, i)))
		}
		waitDurable(t, last)
	}
	bad = e.queueNamed("bad")
	for range settled { // one settlement record each
		if d, ok, err := e.v.Get("bad", true, 1); err != nil || !ok {
			t.Fatalf("get: %v %v %v", d, ok, err)
		}
		if err := bad.local().Housekeep(); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.r.Close(); err != nil {
		t.Fatal(err)
	}
	e.r = nil
	return e, bad
}

// flipInMiddleBatch flips a byte inside the records of the middle batch of
// a segment file, where the batch's CRC covers it.
func flipInMiddleBatch(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ends []int
	for pos := 0; pos < len(data); {
		h, err := record.ParseHeader(data[pos:])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, pos, err)
		}
		pos += h.Size()
		ends = append(ends, pos)
	}
	pos := ends[len(ends)/2] - 2
	data[pos] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func segmentFile(q *queue, log string) string {
	return filepath.Join(q.store.Dir(), log, fmt.Sprintf("%020d.log", 0))
}

// wantCrashed checks that every operation on a crashed queue gets the 404
// RabbitMQ gives a crashed queue, and that a message routed to it is
// refused.
func (e *env) wantCrashed(name string) {
	e.t.Helper()
	text := "NOT_FOUND - queue '" + name + "' in vhost '/' has crashed and failed to restart"
	_, err := e.v.DeclareQueue(QueueDef{Name: name}, true)
	wantCode(e.t, err, amqpwire.CodeNotFound, text)
	_, err = e.v.DeclareQueue(QueueDef{Name: name, Durable: true}, false)
	wantCode(e.t, err, amqpwire.CodeNotFound, text)
	_, _, err = e.v.Get(name, true, 1)
	wantCode(e.t, err, amqpwire.CodeNotFound, text)
	_, err = e.v.Consume(name, ConsumeSpec{Tag: "c", Consumer: newConsumer(-1)})
	wantCode(e.t, err, amqpwire.CodeNotFound, text)
	_, err = e.v.PurgeQueue(name, 1)
	wantCode(e.t, err, amqpwire.CodeNotFound, text)
	if res := e.publish(persistent("", name, "x")); res.Routed != 1 || res.Rejected != 1 {
		e.t.Fatalf("publish to the crashed queue: %+v, want it refused", res)
	}
	for _, d := range e.v.QueueDetails() {
		if d.Name == name && d.State != "crashed" {
			e.t.Fatalf("queue details of %s: state %q", name, d.State)
		}
	}
}

// wantServing checks that the queue still gives back its n messages.
func (e *env) wantServing(name string, n int) {
	e.t.Helper()
	got := e.drain(name)
	if fmt.Sprint(got) != fmt.Sprint(bodies(name, n)) {
		e.t.Fatalf("queue %s gave %v, want %d messages", name, got, n)
	}
}

// A byte flipped in a queue's log after a clean stop is trusted at Open;
// the scrubber finds it and crashes that queue alone, with RabbitMQ's
// answer for a crashed queue on each operation; deleting the queue
// removes its files, and a new queue of that name works.
func TestScrubberCrashesOnlyTheDamagedQueue(t *testing.T) {
	e, bad := damagedQueueEnv(t, 20, 0)
	flipInMiddleBatch(t, segmentFile(bad, queuestore.MessagesLog))
	e.open()
	if got := e.messages("bad"); got != 20 {
		t.Fatalf("before the scrub: %d messages, want 20 (recovery trusts a clean log)", got)
	}
	c := newConsumer(0)
	e.consume("bad", c, false)
	e.r.stores.Scrub(context.Background(), false)
	if c.cancelled.Load() != 1 {
		t.Fatal("the crashed queue's consumer was not cancelled")
	}
	e.wantCrashed("bad")
	e.wantServing("good", 20)
	if _, err := e.v.DeleteQueue("bad", false, false, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bad.store.Dir()); !os.IsNotExist(err) {
		t.Fatalf("the deleted crashed queue's files are still there: %v", err)
	}
	e.declareQueue("bad", true)
	waitDurable(t, e.publish(persistent("", "bad", "bad0")))
	e.restart()
	e.wantServing("bad", 1)
}

// A read that finds the log damaged (basic.get reaching the bad batch
// before the scrubber does) crashes the queue, rather than answering 541
// INTERNAL_ERROR, which closes the client's connection, at every retry.
func TestDamagedReadCrashesTheQueue(t *testing.T) {
	e, bad := damagedQueueEnv(t, 20, 0)
	flipInMiddleBatch(t, segmentFile(bad, queuestore.MessagesLog))
	e.open()
	for {
		_, ok, err := e.v.Get("bad", true, 1)
		if err != nil {
			wantCode(t, err, amqpwire.CodeNotFound, "")
			break
		}
		if !ok {
			t.Fatal("drained the damaged queue without an error")
		}
	}
	e.wantCrashed("bad")
	e.wantServing("good", 20)
}

// A queue whose settlement log cannot be read back at Open is crashed;
// the registry opens and the other queues serve.
func TestUnreadableQueueAtOpenCrashesOnlyThatQueue(t *testing.T) {
	e, bad := damagedQueueEnv(t, 20, 3)
	flipInMiddleBatch(t, segmentFile(bad, queuestore.SettlementLog))
	e.open()
	e.wantCrashed("bad")
	e.wantServing("good", 20)
	e.restart()
	e.wantCrashed("bad") // still damaged: nothing was repaired or deleted
	if _, err := os.Stat(segmentFile(bad, queuestore.MessagesLog)); err != nil {
		t.Fatalf("the crashed queue's messages log: %v", err)
	}
}
