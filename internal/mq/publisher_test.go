package mq

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func (p *Publisher) mustPublish(t *testing.T, m *Message) PublishResult {
	t.Helper()
	res, err := p.Publish(m)
	if err != nil {
		t.Fatalf("Publish(%s, %q): %v", m.Exchange, m.RoutingKey, err)
	}
	return res
}

func isDone(d Durability) bool {
	select {
	case <-d.Done():
		return true
	default:
		return false
	}
}

// A Publisher holds stream records back until Flush, then appends them as
// one batch in publish order; every logged message of the flush, whatever
// its queue, shares one commit, and their Durabilities follow each other.
func TestPublisherBatchesStreamRecordsUntilFlush(t *testing.T) {
	e, fs := newStreamEnv(t)
	e.declareStream("s", nil)
	e.declareQueue("dq", true)
	e.declareQueue("tq", false)
	p := e.v.NewPublisher()

	var ds []Durability
	for i := range 3 {
		m := persistent("", "s", fmt.Sprint("s", i))
		m.Properties.MessageID = fmt.Sprint("id-", i)
		m.Properties.Headers = amqpwire.Table{"n": int32(i), "tag": "t"}
		ds = append(ds, p.mustPublish(t, m).Durable)
	}
	// Not logged: takes no place in the commit.
	if res := p.mustPublish(t, msg("", "tq", "transient")); res.Durable.Pending() || res.Routed != 1 {
		t.Fatalf("transient publish: %+v", res)
	}
	// A durable classic queue gets its message at once; its confirm waits
	// with the others'.
	ds = append(ds, p.mustPublish(t, persistent("", "dq", "classic")).Durable)
	if n := e.messages("dq"); n != 1 {
		t.Fatalf("classic queue holds %d messages before the flush", n)
	}
	ds = append(ds, p.mustPublish(t, msg("", "s", "s3")).Durable) // any message to a stream is logged

	st := fs.stream("s")
	if end := st.EndOffset(); end != 0 || !p.Pending() {
		t.Fatalf("before Flush: stream end %d, pending %v", end, p.Pending())
	}
	for i, d := range ds {
		if !d.Pending() || isDone(d) {
			t.Fatalf("message %d: pending %v, done before the flush", i, d.Pending())
		}
		if i > 0 && !d.Follows(ds[i-1]) {
			t.Fatalf("message %d does not follow message %d in the commit", i, i-1)
		}
	}

	p.Flush()
	if p.Pending() {
		t.Fatal("Pending after Flush")
	}
	for i, d := range ds {
		if err := d.wait(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if end, appends := st.EndOffset(), st.appends.Load(); end != 4 || appends != 1 {
		t.Fatalf("after Flush: stream end %d in %d appends, want 4 in 1", end, appends)
	}
	c := newStreamConsumer(-1)
	e.consumeStream("s", c, "first")
	c.expect(t, []string{"s0", "s1", "s2", "s3"}, 0)
	// A second flush starts a new commit.
	d := p.mustPublish(t, persistent("", "s", "next")).Durable
	if d.Follows(ds[len(ds)-1]) {
		t.Fatal("a message after a flush follows one before it")
	}
	p.Flush()
	if err := d.wait(); err != nil {
		t.Fatal(err)
	}
	c.expect(t, []string{"next"}, 4)
}

// Properties and headers survive the batch, each record with its own.
func TestPublisherBatchKeepsEachMessagesProperties(t *testing.T) {
	e, _ := newStreamEnv(t)
	e.declareStream("s", nil)
	p := e.v.NewPublisher()
	for i := range 3 {
		m := persistent("", "s", fmt.Sprint("b", i))
		m.Properties.MessageID = fmt.Sprint("id-", i)
		m.Properties.Priority = uint8(i)
		if i != 1 {
			m.Properties.Headers = amqpwire.Table{"n": int32(i), "x-kafka-key": fmt.Sprint("k", i)}
		}
		p.mustPublish(t, m)
	}
	p.Flush()
	c := newStreamConsumer(-1)
	e.consumeStream("s", c, "first")
	for i := range 3 {
		got := c.next(t).Message
		pr := got.Properties
		if string(got.Body) != fmt.Sprint("b", i) || pr.MessageID != fmt.Sprint("id-", i) || pr.Priority != uint8(i) || pr.DeliveryMode != 2 {
			t.Fatalf("message %d: %q %+v", i, got.Body, pr)
		}
		_, hasN := pr.Headers["n"]
		if i == 1 && (hasN || pr.Headers[KafkaKeyHeader] != nil) {
			t.Fatalf("message 1 picked up another's headers: %v", pr.Headers)
		}
		if i != 1 && (pr.Headers["n"] != int32(i) || pr.Headers[KafkaKeyHeader] != fmt.Sprint("k", i)) {
			t.Fatalf("message %d headers %v", i, pr.Headers)
		}
	}
}

// A batch the stream refuses is appended message by message, so only a
// message the stream refuses on its own fails, and order is kept.
func TestPublisherRefusedMessageFailsAlone(t *testing.T) {
	e, fs := newStreamEnv(t)
	e.declareStream("s", nil)
	fs.stream("s").maxBatch = 1000
	p := e.v.NewPublisher()
	bodies := []string{"a", "b", strings.Repeat("x", 2000), "c", strings.Repeat("y", 400), strings.Repeat("z", 400)}
	var ds []Durability
	for _, b := range bodies {
		ds = append(ds, p.mustPublish(t, persistent("", "s", b)).Durable)
	}
	p.Flush()
	for i, d := range ds {
		err := d.wait()
		if i == 2 {
			if !errors.Is(err, ErrStreamRefused) {
				t.Fatalf("oversized message: err %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	var failed []int
	ds[0].RunErrs(ds[len(ds)-1], func(pos int, err error) { failed = append(failed, pos) })
	if fmt.Sprint(failed) != "[2]" {
		t.Fatalf("RunErrs reported %v, want [2]", failed)
	}
	c := newStreamConsumer(-1)
	e.consumeStream("s", c, "first")
	c.expect(t, []string{"a", "b", "c", bodies[4], bodies[5]}, 0)
}

// Past maxPendingBytes a Publisher flushes by itself.
func TestPublisherFlushesWhenFull(t *testing.T) {
	e, fs := newStreamEnv(t)
	e.declareStream("s", nil)
	p := e.v.NewPublisher()
	body := strings.Repeat("m", 10_000)
	var first Durability
	for i := 0; fs.stream("s").EndOffset() == 0; i++ {
		if i > maxPendingBytes/len(body)+1 {
			t.Fatalf("%d messages held back, more than maxPendingBytes", i)
		}
		d := p.mustPublish(t, persistent("", "s", body)).Durable
		if i == 0 {
			first = d
		}
	}
	if err := first.wait(); err != nil {
		t.Fatal(err)
	}
	if p.Pending() {
		t.Fatal("still pending after flushing by itself")
	}

	// Messages to a durable queue count too, though they hold no bytes.
	e.declareQueue("dq", true)
	first = p.mustPublish(t, persistent("", "dq", "m")).Durable
	for range maxPendingMessages - 1 {
		p.mustPublish(t, persistent("", "dq", "m"))
	}
	if p.Pending() {
		t.Fatalf("%d messages pending", maxPendingMessages)
	}
	if err := first.wait(); err != nil {
		t.Fatal(err)
	}
}

// Records held for a stream deleted before the flush are dropped, and
// their confirms succeed, as for a message whose queue was deleted.
func TestPublisherStreamDeletedBeforeFlush(t *testing.T) {
	e, _ := newStreamEnv(t)
	e.declareStream("s", nil)
	p := e.v.NewPublisher()
	d := p.mustPublish(t, persistent("", "s", "orphan")).Durable
	if _, err := e.v.DeleteQueue("s", false, false, 0); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	if err := d.wait(); err != nil {
		t.Fatalf("confirm of a message to a deleted stream: %v", err)
	}
	if res := p.mustPublish(t, persistent("", "s", "late")); res.Routed != 0 || res.Durable.Pending() {
		t.Fatalf("publish to the deleted stream: %+v", res)
	}
}

// A stream whose Sync fails (a closed log, a failed fsync) fails the
// confirms waiting for it; one whose queue was deleted meanwhile confirms
// them, as RabbitMQ does for a message whose queue was deleted.
func TestStreamSyncErrorIsANack(t *testing.T) {
	for _, deleteQueue := range []bool{false, true} {
		t.Run(fmt.Sprintf("queue deleted %v", deleteQueue), func(t *testing.T) {
			e, fs := newStreamEnv(t)
			e.declareStream("s", nil)
			st := fs.stream("s")
			st.syncGate = make(chan struct{})
			p := e.v.NewPublisher()
			d := p.mustPublish(t, persistent("", "s", "m")).Durable
			p.Flush() // appended; the syncer waits at the gate
			if deleteQueue {
				if _, err := e.v.DeleteQueue("s", false, false, 0); err != nil {
					t.Fatal(err)
				}
			} else if err := st.log.Close(); err != nil { // as after a failed fsync
				t.Fatal(err)
			}
			close(st.syncGate)
			err := d.wait()
			if deleteQueue && err != nil {
				t.Fatalf("message to a deleted stream queue: %v, want a confirm", err)
			}
			if !deleteQueue && err == nil {
				t.Fatal("confirmed a message whose stream failed to sync")
			}
		})
	}
}

// A message's Durability is done only once a Sync of its stream covered
// it, whatever the flush points.
func TestPublisherConfirmMeansSynced(t *testing.T) {
	e, fs := newStreamEnv(t)
	e.declareStream("s", nil)
	st := fs.stream("s")
	p := e.v.NewPublisher()
	const n = 500
	ds := make(chan Durability, n)
	checked := make(chan error, 1)
	go func() {
		for i := range n {
			d := <-ds
			<-d.Done()
			if err := d.Err(); err != nil {
				checked <- fmt.Errorf("message %d: %v", i, err)
				return
			}
			if synced := st.synced.Load(); synced <= int64(i) {
				checked <- fmt.Errorf("message %d (offset %d) confirmed with only %d offsets synced", i, i, synced)
				return
			}
		}
		checked <- nil
	}()
	for i := range n {
		ds <- p.mustPublish(t, persistent("", "s", fmt.Sprint(i))).Durable
		if i%7 == 3 || i%11 == 0 {
			p.Flush()
		}
	}
	p.Flush()
	if err := <-checked; err != nil {
		t.Fatal(err)
	}
}

// A message that cannot be encoded as a record is refused at once and
// leaves the batch of the others intact.
func TestPublisherUnencodableMessage(t *testing.T) {
	e, fs := newStreamEnv(t)
	e.declareStream("s", nil)
	p := e.v.NewPublisher()
	bad := persistent("", "s", "bad")
	bad.Properties.Headers = amqpwire.Table{"h": struct{}{}} // no AMQP field type
	if res := p.mustPublish(t, bad); res.Rejected != 1 || res.Durable.Pending() {
		t.Fatalf("unencodable message: %+v", res)
	}
	d := p.mustPublish(t, persistent("", "s", "good")).Durable
	p.Flush()
	if err := d.wait(); err != nil {
		t.Fatal(err)
	}
	if end := fs.stream("s").EndOffset(); end != 1 {
		t.Fatalf("stream end %d, want 1", end)
	}
}
