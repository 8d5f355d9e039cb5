package amqp

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestTxCommitAndRollback: publishes and acks of a transactional channel
// take effect at commit and are undone by rollback.
func TestTxCommitAndRollback(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	declareQueue(t, ch, "txq", true)
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	publish := func(i int) {
		t.Helper()
		if err := ch.PublishWithContext(t.Context(), "", "txq", false, false,
			amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: body(i)}); err != nil {
			t.Fatal(err)
		}
	}
	ready := func() int {
		t.Helper()
		return b.queueInfo("txq").Messages
	}

	for i := range 3 {
		publish(i)
	}
	// A round trip on the channel proves the publishes were processed.
	if _, err := ch.QueueDeclarePassive("txq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if n := ready(); n != 0 {
		t.Fatalf("%d messages visible before commit", n)
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	if n := ready(); n != 3 {
		t.Fatalf("%d messages after commit, want 3", n)
	}

	publish(3)
	publish(4)
	if err := ch.TxRollback(); err != nil {
		t.Fatal(err)
	}
	if err := ch.TxCommit(); err != nil { // commits nothing
		t.Fatal(err)
	}
	if n := ready(); n != 3 {
		t.Fatalf("%d messages after rollback, want 3", n)
	}

	// Acks: rolled back, the message is unacked again; committed, gone.
	d, ok, err := ch.Get("txq", false)
	if err != nil || !ok {
		t.Fatalf("get: ok=%v err=%v", ok, err)
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}
	if err := ch.TxRollback(); err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(false); err != nil { // still a valid tag after the rollback
		t.Fatal(err)
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	if n := ready(); n != 2 {
		t.Fatalf("%d messages after the committed ack, want 2", n)
	}

	// An uncommitted ack when the channel closes: the message is requeued.
	d, _, _ = ch.Get("txq", false)
	d.Ack(false)
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "requeue on close", func() bool { return ready() == 2 })
}

// TestTxMandatoryReturnAtCommit: an unroutable mandatory message in a
// transaction is returned when the transaction commits.
func TestTxMandatoryReturnAtCommit(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishWithContext(t.Context(), "", "nowhere", true, false, amqp091.Publishing{Body: []byte("r")}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-returns:
		t.Fatalf("returned before commit: %+v", r)
	default:
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	r := <-returns // the return precedes commit-ok on the wire
	if r.ReplyCode != amqp091.NoRoute || string(r.Body) != "r" {
		t.Errorf("return %+v", r)
	}
}
