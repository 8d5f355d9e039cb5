package mq

import (
	"slices"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func TestRoundRobinWithCredit(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	c1, c2, c3 := newConsumer(-1), newConsumer(-1), newConsumer(2)
	e.consume("q", c1, false)
	e.consume("q", c2, false)
	s3 := e.consume("q", c3, false)
	for _, b := range bodies("m", 9) {
		e.publish(msg("", "q", b))
	}
	// c3 takes two in its turns, then refuses m8, which goes on to c1; from
	// then on c3 is skipped.
	if got, want := c1.bodies(), []string{"m0", "m3", "m6", "m8"}; !slices.Equal(got, want) {
		t.Errorf("c1 got %v, want %v", got, want)
	}
	if got, want := c2.bodies(), []string{"m1", "m4", "m7"}; !slices.Equal(got, want) {
		t.Errorf("c2 got %v, want %v", got, want)
	}
	if got, want := c3.bodies(), []string{"m2", "m5"}; !slices.Equal(got, want) {
		t.Errorf("c3 got %v, want %v", got, want)
	}
	for _, b := range bodies("n", 4) {
		e.publish(msg("", "q", b))
	}
	if got := c3.bodies(); len(got) != 2 {
		t.Errorf("paused consumer was offered more: %v", got)
	}
	c3.addCredit(1)
	s3.Resume()
	for _, b := range bodies("p", 3) {
		e.publish(msg("", "q", b))
	}
	if got := c3.bodies(); len(got) != 3 {
		t.Errorf("resumed consumer got %v, want one more", got)
	}

	// Without credit anywhere, messages wait; Resume delivers them in order.
	e.declareQueue("w", false)
	a := newConsumer(1)
	sa := e.consume("w", a, false)
	for _, b := range bodies("w", 4) {
		e.publish(msg("", "w", b))
	}
	if got := a.bodies(); !slices.Equal(got, []string{"w0"}) {
		t.Fatalf("before resume: %v", got)
	}
	if e.messages("w") != 3 {
		t.Fatalf("ready %d, want 3", e.messages("w"))
	}
	a.addCredit(2)
	sa.Resume()
	if got := a.bodies(); !slices.Equal(got, []string{"w0", "w1", "w2"}) {
		t.Fatalf("after resume: %v", got)
	}
	a.addCredit(10)
	sa.Resume()
	if got := a.bodies(); !slices.Equal(got, []string{"w0", "w1", "w2", "w3"}) {
		t.Fatalf("after second resume: %v", got)
	}
}

func TestRoundRobinIsFair(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	cs := []*testConsumer{newConsumer(-1), newConsumer(-1), newConsumer(-1)}
	for _, c := range cs {
		e.consume("q", c, true)
	}
	for _, b := range bodies("m", 30) {
		e.publish(msg("", "q", b))
	}
	var all []string
	for i, c := range cs {
		got := c.bodies()
		if len(got) != 10 {
			t.Errorf("consumer %d got %d messages", i, len(got))
		}
		for j := 1; j < len(got); j++ {
			if !lessBody(got[j-1], got[j]) {
				t.Errorf("consumer %d out of order: %v", i, got)
			}
		}
		all = append(all, got...)
	}
	if len(all) != 30 {
		t.Errorf("%d delivered", len(all))
	}
}

func lessBody(a, b string) bool { return len(a) < len(b) || (len(a) == len(b) && a < b) }

func TestConsumeStartsPaused(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	e.publish(msg("", "q", "early"))
	c := newConsumer(-1)
	sub, err := e.v.Consume("q", ConsumeSpec{Conn: 1, Consumer: c})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.deliveries()) != 0 {
		t.Fatal("delivered before Resume (before consume-ok could be sent)")
	}
	sub.Resume()
	if got := c.bodies(); !slices.Equal(got, []string{"early"}) {
		t.Fatalf("got %v", got)
	}
}

func TestRequeueOrderAndRedelivered(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	c := newConsumer(5)
	sub := e.consume("q", c, false)
	for _, b := range bodies("m", 8) {
		e.publish(msg("", "q", b))
	}
	ds := c.deliveries() // m0..m4 unacked, m5..m7 ready
	if len(ds) != 5 {
		t.Fatalf("%d deliveries", len(ds))
	}
	for _, d := range ds {
		if d.Redelivered {
			t.Error("first delivery marked redelivered")
		}
	}
	sub.Cancel() // unacked stay unacked
	if e.messages("q") != 3 {
		t.Fatalf("ready %d after cancel, want 3", e.messages("q"))
	}
	if err := e.v.Ack("q", ds[1].Tag); err != nil {
		t.Fatal(err)
	}
	// Requeue out of order: they go back to their original places.
	if err := e.v.Requeue("q", ds[4].Tag, ds[0].Tag); err != nil {
		t.Fatal(err)
	}
	if err := e.v.Requeue("q", ds[2].Tag); err != nil {
		t.Fatal(err)
	}
	var got []string
	var redelivered []bool
	for {
		d, ok, err := e.v.Get("q", false, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, string(d.Message.Body))
		redelivered = append(redelivered, d.Redelivered)
	}
	if want := []string{"m0", "m2", "m4", "m5", "m6", "m7"}; !slices.Equal(got, want) {
		t.Errorf("order after requeue %v, want %v", got, want)
	}
	if want := []bool{true, true, true, false, false, false}; !slices.Equal(redelivered, want) {
		t.Errorf("redelivered %v, want %v", redelivered, want)
	}
	// m3 is still unacked; requeue it with its neighbours already gone: it
	// is alone at the head.
	if err := e.v.Requeue("q", ds[3].Tag); err != nil {
		t.Fatal(err)
	}
	if got := e.drain("q"); !slices.Equal(got, []string{"m3"}) {
		t.Errorf("after last requeue %v", got)
	}
	// Stale tags settle nothing.
	if err := e.v.Ack("q", ds[3].Tag, 999999); err != nil {
		t.Error(err)
	}
	if err := e.v.Ack("no-such-queue", 1); err != nil {
		t.Error(err)
	}
}

func TestRequeueRedispatches(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	a := newConsumer(1)
	sa := e.consume("q", a, false)
	b := newConsumer(0)
	e.consume("q", b, false)
	e.publish(msg("", "q", "x"))
	d := a.deliveries()[0]
	sa.Cancel()
	// b has no credit: the requeued message waits.
	e.v.Requeue("q", d.Tag)
	if len(b.deliveries()) != 0 || e.messages("q") != 1 {
		t.Fatal("requeued message not waiting")
	}
	c := newConsumer(-1)
	e.consume("q", c, false)
	if got := c.deliveries(); len(got) != 1 || !got[0].Redelivered {
		t.Fatalf("requeued message not redelivered to the new consumer: %v", got)
	}
}

func TestNoAckAndAckSettle(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	c := newConsumer(-1)
	e.consume("q", c, true)
	e.publish(msg("", "q", "payload"))
	if e.r.MemoryUsed() != 0 {
		t.Errorf("no-ack delivery still held: MemoryUsed %d", e.r.MemoryUsed())
	}
	e.declareQueue("q2", false)
	e.publish(msg("", "q2", "12345"))
	if e.r.MemoryUsed() != 5 {
		t.Errorf("MemoryUsed %d, want 5", e.r.MemoryUsed())
	}
	d, ok, _ := e.v.Get("q2", false, 1)
	if !ok {
		t.Fatal("empty")
	}
	if e.r.MemoryUsed() != 5 {
		t.Errorf("unacked message not counted: %d", e.r.MemoryUsed())
	}
	e.v.Ack("q2", d.Tag)
	if e.r.MemoryUsed() != 0 {
		t.Errorf("acked message still counted: %d", e.r.MemoryUsed())
	}
	// One body routed to two queues counts once.
	e.bind("q", "amq.fanout", "", nil)
	e.bind("q2", "amq.fanout", "", nil)
	c.credit = 0
	e.publish(msg("amq.fanout", "", "abc"))
	if got := e.r.MemoryUsed(); got != 3 {
		t.Errorf("fan-out body counted %d bytes, want 3", got)
	}
}

func TestGet(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	if _, ok, err := e.v.Get("q", false, 1); ok || err != nil {
		t.Fatalf("get on empty queue: %v %v", ok, err)
	}
	_, _, err := e.v.Get("missing", false, 1)
	wantCode(t, err, amqpwire.CodeNotFound, "NOT_FOUND - no queue 'missing' in vhost '/'")
	for _, b := range bodies("m", 3) {
		e.publish(msg("", "q", b))
	}
	d, ok, err := e.v.Get("q", false, 1)
	if err != nil || !ok || string(d.Message.Body) != "m0" || d.MessageCount != 2 || d.Queue != "q" {
		t.Fatalf("get: %+v %v %v", d, ok, err)
	}
	d2, _, _ := e.v.Get("q", true, 1)
	if string(d2.Message.Body) != "m1" || d2.MessageCount != 1 {
		t.Fatalf("get 2: %+v", d2)
	}
	e.v.Requeue("q", d.Tag)
	d3, _, _ := e.v.Get("q", true, 1)
	if string(d3.Message.Body) != "m0" || !d3.Redelivered || d3.MessageCount != 1 {
		t.Fatalf("get after requeue: %+v", d3)
	}
}

func TestPurge(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	for _, b := range bodies("m", 5) {
		e.publish(msg("", "q", b))
	}
	d, _, _ := e.v.Get("q", false, 1)
	n, err := e.v.PurgeQueue("q", 1)
	if err != nil || n != 4 {
		t.Fatalf("purge = %d, %v; want 4", n, err)
	}
	if e.messages("q") != 0 {
		t.Error("messages left after purge")
	}
	// The unacked one survives the purge and can be requeued.
	e.v.Requeue("q", d.Tag)
	if got := e.drain("q"); !slices.Equal(got, []string{"m0"}) {
		t.Errorf("after requeue: %v", got)
	}
	_, err = e.v.PurgeQueue("missing", 1)
	wantCode(t, err, amqpwire.CodeNotFound, "")
}

func TestDeleteQueueConditions(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	e.publish(msg("", "q", "m"))
	_, err := e.v.DeleteQueue("q", false, true, 1)
	wantCode(t, err, amqpwire.CodePreconditionFailed, "PRECONDITION_FAILED - queue 'q' in vhost '/' not empty")
	c := newConsumer(0)
	sub := e.consume("q", c, false)
	_, err = e.v.DeleteQueue("q", true, false, 1)
	wantCode(t, err, amqpwire.CodePreconditionFailed, "PRECONDITION_FAILED - queue 'q' in vhost '/' in use")
	sub.Cancel()
	n, err := e.v.DeleteQueue("q", true, false, 1)
	if err != nil || n != 1 {
		t.Fatalf("delete = %d, %v; want 1", n, err)
	}
	if n, err := e.v.DeleteQueue("q", false, false, 1); err != nil || n != 0 {
		t.Errorf("delete of a missing queue = %d, %v", n, err)
	}
	// A new queue of the same name starts empty.
	e.declareQueue("q", false)
	if e.messages("q") != 0 {
		t.Error("redeclared queue not empty")
	}
}

func TestDeleteQueueCancelsConsumers(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	c1, c2 := newConsumer(-1), newConsumer(-1)
	e.consume("q", c1, false)
	s2 := e.consume("q", c2, false)
	e.publish(persistent("", "q", "m"))
	d := append(c1.deliveries(), c2.deliveries()...)[0]
	if _, err := e.v.DeleteQueue("q", false, false, 1); err != nil {
		t.Fatal(err)
	}
	if c1.cancelled.Load() != 1 || c2.cancelled.Load() != 1 {
		t.Errorf("Cancelled calls: %d, %d; want 1, 1", c1.cancelled.Load(), c2.cancelled.Load())
	}
	s2.Cancel() // after deletion: nothing, and no second callback
	if c2.cancelled.Load() != 1 {
		t.Error("Cancelled called twice")
	}
	// Settling deliveries of the deleted queue is harmless.
	if err := e.v.Ack("q", d.Tag); err != nil {
		t.Error(err)
	}
	if e.r.MemoryUsed() != 0 {
		t.Errorf("MemoryUsed %d after deleting the queue", e.r.MemoryUsed())
	}
}

func TestExclusiveConsumer(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	c1 := newConsumer(-1)
	sub, err := e.v.Consume("q", ConsumeSpec{Exclusive: true, Conn: 1, Consumer: c1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.v.Consume("q", ConsumeSpec{Conn: 2, Consumer: newConsumer(-1)})
	wantCode(t, err, amqpwire.CodeAccessRefused, "ACCESS_REFUSED - queue 'q' in vhost '/' in exclusive use")
	sub.Cancel()
	s2, err := e.v.Consume("q", ConsumeSpec{Conn: 2, Consumer: newConsumer(-1)})
	if err != nil {
		t.Fatalf("consume after the exclusive consumer left: %v", err)
	}
	_, err = e.v.Consume("q", ConsumeSpec{Exclusive: true, Conn: 1, Consumer: newConsumer(-1)})
	wantCode(t, err, amqpwire.CodeAccessRefused, "")
	s2.Cancel()
}
