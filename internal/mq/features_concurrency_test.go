package mq

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Dead-lettering, limits, TTLs, priorities and single active consumers
// all at once from several goroutines, on the real clock: no deadlock, no
// race, the retry cycle works under load, and everything settles.
func TestConcurrentDeadLetteringAndLimits(t *testing.T) {
	e := newEnv(t)
	// work: priority, limit 40 (drop-head), dead-letters to retry;
	// retry: 1 ms TTL back to work; a rejected message cycles through
	// retry until it has died 3 times, then consumers ack it.
	e.declareExchange("dlx", "fanout", false, nil)
	e.declareQueueArgs("work", true, amqpwire.Table{"x-max-length": int32(40), "x-max-priority": int32(3),
		"x-dead-letter-exchange": "dlx"})
	e.declareQueueArgs("retry", false, amqpwire.Table{"x-message-ttl": int32(1),
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"})
	e.declareQueueArgs("sac", false, amqpwire.Table{"x-single-active-consumer": true})
	e.bind("retry", "dlx", "", nil)
	e.bind("sac", "dlx", "", nil)

	const publishers, perPublisher = 3, 200
	stop := make(chan struct{})
	var retried atomic.Int64
	var workers sync.WaitGroup
	for i := range 3 {
		c := newChanConsumer(8)
		sub, err := e.v.Consume("work", ConsumeSpec{Tag: fmt.Sprint("w", i), Conn: 1, Consumer: c,
			Args: amqpwire.Table{"x-priority": int32(i % 2)}})
		if err != nil {
			t.Fatal(err)
		}
		sub.Resume()
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				select {
				case d := <-c.ch:
					if DeathCount(d.Message, "work", "rejected") < 3 {
						e.v.Discard("work", d.Tag)
					} else {
						retried.Add(1)
						e.v.Ack("work", d.Tag)
					}
					c.credit.Add(1)
					sub.Resume()
				case <-stop:
					return
				}
			}
		}()
	}
	// Single-active consumers on "sac" come and go.
	workers.Add(1)
	go func() {
		defer workers.Done()
		for i := 0; ; i++ {
			c := newChanConsumer(4)
			sub, err := e.v.Consume("sac", ConsumeSpec{Tag: fmt.Sprint("s", i), Conn: 1, Consumer: c})
			if err != nil {
				t.Error(err)
				return
			}
			sub.Resume()
			var tags []QueueTag
			deadline := time.After(2 * time.Millisecond)
		collect:
			for {
				select {
				case d := <-c.ch:
					tags = append(tags, d.Tag)
				case <-deadline:
					break collect
				case <-stop:
					sub.Cancel()
					e.v.Ack("sac", tags...)
					return
				}
			}
			sub.Cancel()
			if i%2 == 0 {
				e.v.Ack("sac", tags...)
			} else {
				e.v.Requeue("sac", tags...)
			}
		}
	}()
	var pubs sync.WaitGroup
	for p := range publishers {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			for i := range perPublisher {
				m := persistent("", "work", fmt.Sprintf("p%d-%d", p, i))
				m.Properties.Priority = uint8(i % 5)
				if _, err := e.v.Publish(m); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	pubs.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for e.messages("work")+e.messages("retry") > 0 || e.unacked("work") > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not settled: work %d retry %d unacked %d", e.messages("work"), e.messages("retry"), e.unacked("work"))
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline: the retry TTL runs on the real clock
	}
	close(stop)
	workers.Wait()
	if retried.Load() == 0 {
		t.Error("no message made it through three retries")
	}
}

func (e *env) unacked(queue string) int {
	q, err := e.v.lookupQueue(queue)
	if err != nil {
		e.t.Fatal(err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.unacked)
}
