package mq

import (
	"fmt"
	"slices"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func prioMsg(queue, body string, prio uint8) *Message {
	m := msg("", queue, body)
	m.Properties.Priority = prio
	return m
}

func TestPriorityQueueOrder(t *testing.T) {
	e := newEnv(t)
	e.declareQueueArgs("q", false, amqpwire.Table{"x-max-priority": int32(10)})
	for _, p := range []struct {
		body string
		prio uint8
	}{{"low-a", 0}, {"mid-a", 5}, {"top-a", 10}, {"mid-b", 5}, {"over", 200}, {"one", 1}, {"low-b", 0}} {
		e.publish(prioMsg("q", p.body, p.prio))
	}
	// Highest first ("over" is capped at 10), FIFO within a priority.
	want := []string{"top-a", "over", "mid-a", "mid-b", "one", "low-a", "low-b"}
	// A requeued message goes back to its place within its priority.
	d1, d2 := e.get("q"), e.get("q")
	e.v.Requeue("q", d2.Tag, d1.Tag)
	c := newConsumer(-1)
	e.consume("q", c, true)
	if got := c.bodies(); !slices.Equal(got, want) {
		t.Fatalf("delivery order %v\nwant %v", got, want)
	}
	// Later publishes interleave by priority as consumers take them.
	e.declareQueueArgs("w", false, amqpwire.Table{"x-max-priority": int32(3)})
	for i := range 3 {
		e.publish(prioMsg("w", fmt.Sprintf("p0-%d", i), 0))
	}
	e.publish(prioMsg("w", "p3", 3))
	if got := e.drain("w"); !slices.Equal(got, []string{"p3", "p0-0", "p0-1", "p0-2"}) {
		t.Fatalf("got %v", got)
	}
	// No x-max-priority: priorities are ignored.
	e.declareQueue("plain", false)
	e.publish(prioMsg("plain", "a", 0))
	e.publish(prioMsg("plain", "b", 9))
	if got := e.drain("plain"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("plain queue reordered: %v", got)
	}
}

func TestPriorityQueueSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	e.declareQueueArgs("q", true, amqpwire.Table{"x-max-priority": int32(5)})
	var last PublishResult
	for i, prio := range []uint8{1, 5, 1, 3} {
		m := persistent("", "q", fmt.Sprintf("m%d-p%d", i, prio))
		m.Properties.Priority = prio
		last = e.publish(m)
	}
	waitDurable(t, last)
	e.restart()
	if got := e.drain("q"); !slices.Equal(got, []string{"m1-p5", "m3-p3", "m0-p1", "m2-p1"}) {
		t.Fatalf("after restart %v", got)
	}
}

func TestConsumerPriorities(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	consume := func(c *testConsumer, prio any) *Subscription {
		t.Helper()
		sub, err := e.v.Consume("q", ConsumeSpec{Tag: fmt.Sprintf("%p", c), NoAck: true, Conn: 1, Consumer: c,
			Args: amqpwire.Table{"x-priority": prio}})
		if err != nil {
			t.Fatal(err)
		}
		sub.Resume()
		return sub
	}
	low := newConsumer(-1)
	hi1, hi2 := newConsumer(2), newConsumer(2)
	consume(low, int32(0))
	s1 := consume(hi1, int64(10))
	consume(hi2, int8(10))
	for _, b := range bodies("m", 8) {
		e.publish(msg("", "q", b))
	}
	// The two high-priority consumers alternate while they have credit;
	// the low one gets the rest.
	if got := hi1.bodies(); !slices.Equal(got, []string{"m0", "m2"}) {
		t.Errorf("hi1 got %v", got)
	}
	if got := hi2.bodies(); !slices.Equal(got, []string{"m1", "m3"}) {
		t.Errorf("hi2 got %v", got)
	}
	if got := low.bodies(); !slices.Equal(got, []string{"m4", "m5", "m6", "m7"}) {
		t.Errorf("low got %v", got)
	}
	hi1.addCredit(1)
	s1.Resume()
	e.publish(msg("", "q", "n"))
	if got := hi1.bodies(); got[len(got)-1] != "n" {
		t.Errorf("credited high-priority consumer did not get the next message: %v", got)
	}
	_, err := e.v.Consume("q", ConsumeSpec{Tag: "bad", Conn: 1, Consumer: newConsumer(1), Args: amqpwire.Table{"x-priority": "high"}})
	wantCode(t, err, amqpwire.CodePreconditionFailed,
		`PRECONDITION_FAILED - invalid arg 'x-priority' for queue 'q' in vhost '/': "expected integer, got longstr"`)
}

func TestSingleActiveConsumerFailover(t *testing.T) {
	e := newEnv(t)
	e.declareQueueArgs("q", false, amqpwire.Table{"x-single-active-consumer": true})
	a, b, c := newConsumer(-1), newConsumer(-1), newConsumer(-1)
	sa := e.consume("q", a, false)
	sb := e.consume("q", b, false)
	e.consume("q", c, false)
	for _, m := range bodies("m", 6) {
		e.publish(msg("", "q", m))
	}
	if got := a.bodies(); len(got) != 6 || len(b.bodies())+len(c.bodies()) != 0 {
		t.Fatalf("a got %v, b %v, c %v: want everything on a", got, b.bodies(), c.bodies())
	}
	da := a.deliveries()
	e.v.Ack("q", da[0].Tag, da[1].Tag)
	// a's channel closes: consumer cancelled first, its unacked requeued
	// after (the front end's order). b must not start before that.
	sa.Cancel()
	e.publish(msg("", "q", "m6"))
	if got := b.bodies(); len(got) != 0 {
		t.Fatalf("b started before a's deliveries came back: %v", got)
	}
	e.v.Requeue("q", da[2].Tag, da[3].Tag, da[4].Tag, da[5].Tag)
	if got, want := b.bodies(), []string{"m2", "m3", "m4", "m5", "m6"}; !slices.Equal(got, want) {
		t.Fatalf("b got %v, want %v", got, want)
	}
	for _, d := range b.deliveries()[:4] {
		if !d.Redelivered {
			t.Errorf("%s not marked redelivered", d.Message.Body)
		}
	}
	// b cancels after acking everything: c takes over at once.
	var tags []QueueTag
	for _, d := range b.deliveries() {
		tags = append(tags, d.Tag)
	}
	e.v.Ack("q", tags...)
	sb.Cancel()
	e.publish(msg("", "q", "m7"))
	if got := c.bodies(); !slices.Equal(got, []string{"m7"}) {
		t.Fatalf("c got %v", got)
	}
}
