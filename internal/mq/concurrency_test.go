package mq

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// chanConsumer behaves like a front-end channel: TryDeliver takes a credit
// and queues the delivery without blocking; a worker goroutine settles it,
// gives the credit back and calls Resume.
type chanConsumer struct {
	ch     chan *Delivery
	credit atomic.Int64
}

func newChanConsumer(prefetch int) *chanConsumer {
	c := &chanConsumer{ch: make(chan *Delivery, prefetch)}
	c.credit.Store(int64(prefetch))
	return c
}

func (c *chanConsumer) TryDeliver(d *Delivery) bool {
	if c.credit.Add(-1) < 0 {
		c.credit.Add(1)
		return false
	}
	c.ch <- d // never blocks: at most prefetch deliveries are unsettled
	return true
}

func TestConcurrentPublishConsumeSettle(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.QueueMemoryBytes = 8 << 10 })
	e.declareQueue("q", true)
	const publishers, perPublisher, consumers = 3, 400, 3
	total := publishers * perPublisher

	var mu sync.Mutex
	acked := make(map[string]int)
	done := make(chan struct{})
	var ackedCount atomic.Int64
	var workers sync.WaitGroup
	for i := range consumers {
		c := newChanConsumer(5)
		sub, err := e.v.Consume("q", ConsumeSpec{Tag: fmt.Sprint(i), Conn: 1, Consumer: c})
		if err != nil {
			t.Fatal(err)
		}
		sub.Resume()
		workers.Add(1)
		go func() {
			defer workers.Done()
			n := 0
			for {
				select {
				case d := <-c.ch:
					n++
					// Requeue every 7th first delivery, ack the rest.
					if n%7 == 0 && !d.Redelivered {
						e.v.Requeue("q", d.Tag)
					} else {
						e.v.Ack("q", d.Tag)
						mu.Lock()
						acked[string(d.Message.Body)]++
						mu.Unlock()
						if ackedCount.Add(1) == int64(total) {
							close(done)
						}
					}
					c.credit.Add(1)
					sub.Resume()
				case <-done:
					return
				}
			}
		}()
	}
	var pubs sync.WaitGroup
	for p := range publishers {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			for i := range perPublisher {
				m := persistent("", "q", fmt.Sprintf("p%d-%d", p, i))
				if i%3 == 0 {
					m.Properties.DeliveryMode = 1
				}
				res, err := e.v.Publish(m)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Durable.Pending() {
					if err := res.Durable.wait(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	pubs.Wait()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("only %d of %d acked", ackedCount.Load(), total)
	}
	workers.Wait()
	if len(acked) != total {
		t.Errorf("%d distinct messages acked, want %d", len(acked), total)
	}
	for body, n := range acked {
		if n != 1 {
			t.Errorf("%s acked %d times", body, n)
		}
	}
	if e.messages("q") != 0 || e.r.MemoryUsed() != 0 {
		t.Errorf("left: %d messages, %d bytes", e.messages("q"), e.r.MemoryUsed())
	}
	e.restart()
	if n := e.messages("q"); n != 0 {
		t.Errorf("%d messages after restart", n)
	}
}
