package mq

import (
	"testing"

	"github.com/wharf-mq/wharf/internal/seglog"
)

// A message whose queue is deleted before its fsync is confirmed, as
// RabbitMQ does.
func TestConfirmOfMessageToDeletedQueue(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	p := e.v.NewPublisher()
	res := p.mustPublish(t, persistent("", "q", "m"))
	if _, err := e.v.DeleteQueue("q", false, false, 1); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	if err := res.Durable.wait(); err != nil {
		t.Fatalf("message to a deleted queue: %v, want a confirm", err)
	}
}

// Close closes every log of a store, also a settlement log it creates
// itself for the first settlements (taken since the last housekeeping).
func TestCloseClosesASettlementLogItCreates(t *testing.T) {
	before := seglog.OpenFiles()
	e := newEnv(t)
	e.declareQueue("q", true)
	waitDurable(t, e.publish(persistent("", "q", "m")))
	if got := e.drain("q"); len(got) != 1 { // settled; written by Close
		t.Fatalf("drained %v", got)
	}
	if err := e.r.Close(); err != nil {
		t.Fatal(err)
	}
	e.r = nil
	if after := seglog.OpenFiles(); after != before {
		t.Fatalf("%d segment files open after Close, %d before the registry opened", after, before)
	}
	e.open()
	if n := e.messages("q"); n != 0 {
		t.Fatalf("%d messages after a restart, want 0", n)
	}
}
