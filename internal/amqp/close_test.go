package amqp

import (
	"errors"
	"os"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// TestGracefulCloseReportsNoError: Connection.Close must not look like a
// failure. When the broker closed the socket right after close-ok,
// amqp091-go's reader often saw EOF before Close had finished and told
// NotifyClose listeners "Exception (501) EOF" (60-68% of closes), which
// makes applications reconnect.
func TestGracefulCloseReportsNoError(t *testing.T) {
	b := startBroker(t)
	const closes = 100
	failed := 0
	for range closes {
		conn := b.dial()
		notify := conn.NotifyClose(make(chan *amqp091.Error, 1))
		ch := openChannel(t, conn)
		declareQueue(t, ch, "", false)
		if err := conn.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if e, ok := <-notify; ok {
			failed++
			if failed == 1 {
				t.Errorf("graceful close reported %v", e)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d graceful closes reported an error to NotifyClose", failed, closes)
	}
}

// TestCloseOKLeavesTheSocketToTheClient: after close-ok the broker waits
// for the client to hang up, as RabbitMQ does, and closes the socket
// itself only when the client does not within closeTimeout.
func TestCloseOKLeavesTheSocketToTheClient(t *testing.T) {
	b := startBroker(t)
	live := func() int {
		n := 0
		b.srv.eachConn(func(*conn) { n++ })
		return n
	}

	polite := dialRaw(t, b.addr, 0)
	polite.send(0, &amqpwire.ConnectionClose{ReplyCode: 200, ReplyText: "bye"})
	polite.expect(0, amqpwire.ConnectionCloseOKID)
	polite.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := polite.fr.ReadFrame(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after close-ok the broker did not wait for the client: read %v", err)
	}
	polite.nc.Close()
	waitFor(t, "the connection to end once the client hung up", func() bool { return live() == 0 })

	silent := dialRaw(t, b.addr, 0)
	silent.send(0, &amqpwire.ConnectionClose{ReplyCode: 200, ReplyText: "bye"})
	silent.expect(0, amqpwire.ConnectionCloseOKID)
	start := time.Now()
	silent.nc.SetReadDeadline(start.Add(closeTimeout + 5*time.Second))
	silent.expectEOF()
	if waited := time.Since(start); waited < closeTimeout-500*time.Millisecond {
		t.Fatalf("broker closed after %v, before the client had closeTimeout (%v) to hang up", waited, closeTimeout)
	}
}

// TestExclusiveQueuesGoBeforeCloseOK: a client that closes and reconnects
// at once may declare its exclusive queue again: RabbitMQ deletes them
// before it sends close-ok. The first client here keeps its socket open
// after close-ok, as a client may, so the queue must not wait for it.
func TestExclusiveQueuesGoBeforeCloseOK(t *testing.T) {
	b := startBroker(t)
	first := dialRaw(t, b.addr, 0)
	first.openChannel(1)
	first.send(1, &amqpwire.QueueDeclare{Queue: "mine", Exclusive: true})
	first.expect(1, amqpwire.QueueDeclareOKID)
	first.send(0, &amqpwire.ConnectionClose{ReplyCode: 200, ReplyText: "bye"})
	first.expect(0, amqpwire.ConnectionCloseOKID)

	if _, err := b.channel().QueueDeclare("mine", false, false, true, false, nil); err != nil {
		t.Fatalf("the exclusive queue outlived its connection's close-ok: %v", err)
	}
}
