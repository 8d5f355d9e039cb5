package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Settings of the AMQP workloads, as the AMQP issues set them.
const (
	confirmWindow = 256 // unconfirmed publishes allowed in flight
	prefetch      = 200 // basic.qos prefetch count of each consumer channel, unless the flow sets one
)

// amqpFlow is a publisher -> queue(s) -> consumer workload through
// amqp091-go: one publishing connection, one consuming connection (a
// channel per queue), manual per-message acks.
type amqpFlow struct {
	bodySize   int
	persistent bool   // delivery_mode 2
	confirms   bool   // confirm.select, at most confirmWindow unconfirmed
	durable    bool   // durable queues (and exchange)
	queueType  string // x-queue-type: "" (classic), "quorum", "stream"
	queues     int    // 1: publish to the default exchange; more: a fanout exchange bound to each
	consume    bool   // false: publish only, throughput counted from confirms
	// quorumMembers, when set, is a quorum queue's
	// x-quorum-initial-group-size.
	quorumMembers int
	// prefetch, when set, replaces the default prefetch count.
	prefetch int
	// perSecond, when set, paces the publisher at a fixed offered load;
	// each message is stamped with the moment it was due, so a publisher
	// held back by the broker shows as latency rather than as fewer
	// samples. Zero: flat out.
	perSecond int
}

// prefetchCount is the basic.qos prefetch count of f's consumers.
func (f amqpFlow) prefetchCount() int {
	if f.prefetch > 0 {
		return f.prefetch
	}
	return prefetch
}

// run executes one run of f against the broker at url and returns:
// rate (messages published per second, counted as each is delivered to its
// first queue's consumer, or as it is confirmed when nothing consumes),
// p50/p99 publish-to-deliver latency in ms, and backlog (messages published
// but not delivered when the window closed, per queue).
func (s *suite) runAMQPFlow(ctx context.Context, url string, f amqpFlow) (figures, error) {
	return s.runAMQPFlowServedBy(ctx, url, f, func(string) (string, error) { return url, nil })
}

// runAMQPFlowServedBy is runAMQPFlow with the topology declared at url and
// the publisher and consumers connected to the broker servedBy names once
// the first queue exists (in a cluster: the node leading it).
func (s *suite) runAMQPFlowServedBy(ctx context.Context, url string, f amqpFlow, servedBy func(queue string) (string, error)) (figures, error) {
	name := s.uniqueName("bench")
	admin, err := amqp.Dial(url)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	ach, err := admin.Channel()
	if err != nil {
		return nil, err
	}
	queues, exchange, err := declareTopology(ach, name, f)
	if err != nil {
		return nil, err
	}
	defer deleteTopology(admin, queues, exchange)
	if url, err = servedBy(queues[0]); err != nil {
		return nil, err
	}

	w := s.newWindow()
	var consumers []*flowConsumer
	var consumerConn *amqp.Connection
	var wg sync.WaitGroup
	if f.consume {
		consumerConn, err = amqp.Dial(url)
		if err != nil {
			return nil, err
		}
		defer consumerConn.Close()
		for _, q := range queues {
			c, err := s.startFlowConsumer(consumerConn, q, f.prefetchCount(), w, &wg)
			if err != nil {
				return nil, err
			}
			consumers = append(consumers, c)
		}
	}

	pub, err := s.publishFlow(ctx, url, exchange, routingKey(queues, exchange), f, w)
	if err != nil {
		return nil, err
	}
	if consumerConn != nil {
		consumerConn.Close() // ends every consumer's delivery channel
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	out := figures{}
	if !f.consume {
		out["rate"] = float64(pub.confirmedInWindow) / w.seconds()
		return out, nil
	}
	var delivered int64
	var all []latencies
	for _, c := range consumers {
		delivered += c.inWindow
		all = append(all, c.latency)
	}
	lat := merge(all...)
	if len(lat) == 0 {
		return nil, errors.New("no message delivered in the measurement window")
	}
	out["rate"] = float64(delivered) / float64(len(queues)) / w.seconds()
	out["p50"] = millis(percentile(lat, 0.50))
	out["p99"] = millis(percentile(lat, 0.99))
	var deliveredByEnd int64
	for _, c := range consumers {
		deliveredByEnd += c.byWindowEnd.Load()
	}
	out["backlog"] = float64(pub.publishedByWindowEnd) - float64(deliveredByEnd)/float64(len(queues))
	return out, nil
}

// declareTopology declares f's queues (and fanout exchange) named after
// name and returns them.
func declareTopology(ch *amqp.Channel, name string, f amqpFlow) (queues []string, exchange string, err error) {
	args := amqp.Table{}
	if f.queueType != "" {
		args["x-queue-type"] = f.queueType
	}
	if f.quorumMembers > 0 {
		args["x-quorum-initial-group-size"] = f.quorumMembers
	}
	for i := range f.queues {
		q := name
		if f.queues > 1 {
			q = fmt.Sprintf("%s-%d", name, i)
		}
		if _, err := ch.QueueDeclare(q, f.durable, false, false, false, args); err != nil {
			return nil, "", fmt.Errorf("declare queue %s: %w", q, err)
		}
		queues = append(queues, q)
	}
	if f.queues > 1 {
		exchange = name + "-fanout"
		if err := ch.ExchangeDeclare(exchange, "fanout", f.durable, false, false, false, nil); err != nil {
			return nil, "", fmt.Errorf("declare exchange: %w", err)
		}
		for _, q := range queues {
			if err := ch.QueueBind(q, "", exchange, false, nil); err != nil {
				return nil, "", fmt.Errorf("bind %s: %w", q, err)
			}
		}
	}
	return queues, exchange, nil
}

// routingKey is the key to publish with: the queue's name through the
// default exchange, nothing through a fanout exchange.
func routingKey(queues []string, exchange string) string {
	if exchange != "" {
		return ""
	}
	return queues[0]
}

// deleteTopology removes what declareTopology made, on a fresh channel (the
// run's channels may have been closed by an error).
func deleteTopology(conn *amqp.Connection, queues []string, exchange string) {
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	defer ch.Close()
	for _, q := range queues {
		_, _ = ch.QueueDelete(q, false, false, false)
	}
	if exchange != "" {
		_ = ch.ExchangeDelete(exchange, false, false)
	}
}

// flowConsumer consumes one queue with manual acks and records the latency
// of every delivery that arrives inside the window.
type flowConsumer struct {
	inWindow    int64 // deliveries inside the window (read after wg.Wait)
	byWindowEnd atomic.Int64
	latency     latencies
}

func (s *suite) startFlowConsumer(conn *amqp.Connection, queue string, prefetch int, w window, wg *sync.WaitGroup) (*flowConsumer, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return nil, err
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", queue, err)
	}
	c := &flowConsumer{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for d := range deliveries {
			now := time.Now()
			if now.Before(w.end) {
				c.byWindowEnd.Add(1)
			}
			if w.contains(now) && len(d.Body) >= 8 {
				c.inWindow++
				c.latency = append(c.latency, s.sinceStamp(d.Body))
			}
			if err := d.Ack(false); err != nil {
				return
			}
		}
	}()
	return c, nil
}

// publishResult is what the publisher counted.
type publishResult struct {
	publishedByWindowEnd int64
	confirmedInWindow    int64
}

// publishFlow publishes f's messages from its own connection until the
// window ends, then waits (bounded) for outstanding confirms.
func (s *suite) publishFlow(ctx context.Context, url, exchange, key string, f amqpFlow, w window) (publishResult, error) {
	var res publishResult
	conn, err := amqp.Dial(url)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return res, err
	}
	body := make([]byte, f.bodySize)
	rand.Read(body)
	mode := amqp.Transient
	if f.persistent {
		mode = amqp.Persistent
	}

	// slots bounds unconfirmed publishes; the confirm reader frees one per
	// confirmation (amqp091-go reports a multiple ack as one confirmation
	// per delivery tag, in order).
	var slots chan struct{}
	var confirmed atomic.Int64
	var nacked atomic.Int64
	confirmDone := make(chan struct{})
	if f.confirms {
		if err := ch.Confirm(false); err != nil {
			return res, err
		}
		slots = make(chan struct{}, confirmWindow)
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, confirmWindow))
		go func() {
			defer close(confirmDone)
			for c := range confirms {
				if !c.Ack {
					nacked.Add(1)
				}
				if w.contains(time.Now()) && c.Ack {
					confirmed.Add(1)
				}
				<-slots
			}
		}()
	} else {
		close(confirmDone)
	}

	// A publisher blocked by the broker (connection.blocked, TCP
	// back-pressure) is cut off a minute after the window instead of
	// hanging the suite.
	watchdog := time.AfterFunc(time.Until(w.end)+time.Minute, func() { conn.Close() })
	defer watchdog.Stop()
	paceStart := time.Now()
	var interval time.Duration
	if f.perSecond > 0 {
		interval = time.Second / time.Duration(f.perSecond)
	}
	for time.Now().Before(w.end) {
		due := time.Now()
		if interval > 0 {
			due = paceStart.Add(time.Duration(res.publishedByWindowEnd) * interval)
			if err := sleepUntil(ctx, due); err != nil {
				return res, err
			}
		}
		if slots != nil {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
		if interval > 0 {
			s.stampAt(body, due)
		} else {
			s.stamp(body)
		}
		if err := ch.PublishWithContext(ctx, exchange, key, false, false,
			amqp.Publishing{DeliveryMode: mode, Body: body}); err != nil {
			return res, fmt.Errorf("publish: %w", err)
		}
		res.publishedByWindowEnd++
	}
	if slots != nil {
		// Wait for the window to drain so the next run starts clean.
		deadline := time.Now().Add(30 * time.Second)
		for len(slots) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	conn.Close()
	<-confirmDone
	res.confirmedInWindow = confirmed.Load()
	if n := nacked.Load(); n > 0 {
		return res, fmt.Errorf("%d publishes nacked", n)
	}
	return res, nil
}
