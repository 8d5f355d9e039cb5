package amqp

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestPublisherFlowControl: once a queue's ready backlog passes
// FlowBacklog, each further publish to it pauses the publisher's reader
// (silently: no connection.blocked), and no message is lost; under the
// limit the publisher is not paused.
func TestPublisherFlowControl(t *testing.T) {
	const limit, extra = 20, 60
	b := startBroker(t, func(c *Config) { c.FlowBacklog = limit })
	conn := b.dial()
	blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 1))
	ch := openChannel(t, conn)
	declareQueue(t, ch, "slow", false)

	publish := func(n int) time.Duration {
		start := time.Now()
		for range n {
			if err := ch.Publish("", "slow", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		// A synchronous method on the same channel returns once the
		// reader has handled every publish before it, pauses included.
		if _, err := ch.QueueDeclarePassive("slow", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	publish(limit)
	if got := b.queueInfo("slow").Messages; got != limit {
		t.Fatalf("queue holds %d messages, want %d", got, limit)
	}
	// Every one of these leaves more than limit ready: one pause each.
	if took, min := publish(extra), extra*flowPauseDuration; took < min {
		t.Fatalf("%d publishes over the backlog limit took %v, want at least %v of flow pauses", extra, took, min)
	}
	if got := b.queueInfo("slow").Messages; got != limit+extra {
		t.Fatalf("queue holds %d messages, want %d", got, limit+extra)
	}
	select {
	case bl := <-blocked:
		t.Fatalf("flow control sent connection.blocked: %+v", bl)
	default:
	}
}
