package crash

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const (
	drainTimeout  = 60 * time.Second
	drainPrefetch = 500
	// drainCheckPeriod is how often a drain asks for its queue's ready
	// count (queue.declare passive), which also proves its acks so far.
	drainCheckPeriod = 50 * time.Millisecond
	drainConsumerTag = "crash-drain"
)

// drainQueues empties every queue of a restarted broker, one consumer per
// queue in parallel, recording and acking each delivery in book. It
// returns the number of messages taken per queue. Every queue must still
// exist; no publisher or other consumer may be connected.
func drainQueues(t *testing.T, addr string, book *amqpBook) []int {
	t.Helper()
	deadline := time.Now().Add(drainTimeout)
	run := book.currentRun()
	taken := make([]int, amqpQueues)
	errs := make([]error, amqpQueues)
	var wg sync.WaitGroup
	for q := range amqpQueues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			taken[q], errs[q] = drainQueue(addr, book, run, q, deadline)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("draining the queues after restart: %v", err)
	}
	return taken
}

// drainQueue consumes queue until a passive declare reports no ready
// message, cancels the consumer, acks what was still buffered and checks
// once more that the queue is empty. Every ack is proven by a passive
// declare on the same channel before it is reported synced.
func drainQueue(addr string, book *amqpBook, run, queue int, deadline time.Time) (int, error) {
	name := queueName(queue)
	conn, ch, err := dialAMQP(addr)
	if err != nil {
		return 0, fmt.Errorf("%s: dial: %w", name, err)
	}
	defer conn.Close()
	readyCount := func() (int, error) {
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err != nil {
			return 0, fmt.Errorf("%s: queue.declare passive: %w", name, err)
		}
		return q.Messages, nil
	}
	// The durable queue must have survived the kill.
	if _, err := readyCount(); err != nil {
		return 0, err
	}
	if err := ch.Qos(drainPrefetch, 0, false); err != nil {
		return 0, fmt.Errorf("%s: qos: %w", name, err)
	}
	deliveries, err := ch.Consume(name, drainConsumerTag, false, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("%s: consume: %w", name, err)
	}

	taken := 0
	var unproven []string
	take := func(d *amqp.Delivery) error {
		id := book.delivered(run, queue, d)
		if err := d.Ack(false); err != nil {
			return fmt.Errorf("%s: ack: %w", name, err)
		}
		book.acked(id)
		unproven = append(unproven, id)
		taken++
		return nil
	}
	check := time.NewTicker(drainCheckPeriod)
	defer check.Stop()
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	for ready := -1; ready != 0; {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return taken, fmt.Errorf("%s: delivery channel closed while draining", name)
			}
			if err := take(&d); err != nil {
				return taken, err
			}
		case <-check.C:
			if ready, err = readyCount(); err != nil {
				return taken, err
			}
			book.acksSynced(unproven, time.Now())
			unproven = unproven[:0]
		case <-timeout.C:
			return taken, fmt.Errorf("%s: not drained within %v: %d taken, %d still ready at the last look", name, drainTimeout, taken, ready)
		}
	}

	// Whatever was delivered before cancel-ok is in deliveries, which
	// the client closes after it.
	if err := ch.Cancel(drainConsumerTag, false); err != nil {
		return taken, fmt.Errorf("%s: cancel: %w", name, err)
	}
	for d := range deliveries {
		if err := take(&d); err != nil {
			return taken, err
		}
	}
	ready, err := readyCount()
	if err != nil {
		return taken, err
	}
	book.acksSynced(unproven, time.Now())
	if ready != 0 {
		return taken, fmt.Errorf("%s: %d messages ready after the drain acked everything it was given; nothing else is connected", name, ready)
	}
	if err := ch.Close(); err != nil {
		return taken, fmt.Errorf("%s: channel close: %w", name, err)
	}
	return taken, nil
}
