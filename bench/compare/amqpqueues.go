package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// runManyQueues declares n durable classic queues, publishes one persistent
// 1 KiB message to each with confirms (window confirmWindow) and fetches
// each back with basic.get and a manual ack, all on one connection. It
// reports each phase's time and the total in ms; the queues are deleted
// afterwards, untimed.
func (s *suite) runManyQueues(ctx context.Context, url string, n int) (figures, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	prefix := s.uniqueName("many")
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	defer func() {
		if dch, err := conn.Channel(); err == nil {
			for _, q := range names {
				_, _ = dch.QueueDelete(q, false, false, false)
			}
			dch.Close()
		}
	}()

	start := time.Now()
	for _, q := range names {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			return nil, fmt.Errorf("declare %s: %w", q, err)
		}
	}
	declared := time.Now()

	if err := ch.Confirm(false); err != nil {
		return nil, err
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n))
	body := make([]byte, 1024)
	rand.Read(body)
	outstanding := 0
	for _, q := range names {
		if outstanding == confirmWindow {
			if err := awaitConfirm(ctx, confirms); err != nil {
				return nil, err
			}
			outstanding--
		}
		if err := ch.PublishWithContext(ctx, "", q, false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body}); err != nil {
			return nil, err
		}
		outstanding++
	}
	for ; outstanding > 0; outstanding-- {
		if err := awaitConfirm(ctx, confirms); err != nil {
			return nil, err
		}
	}
	published := time.Now()

	for _, q := range names {
		d, ok, err := ch.Get(q, false)
		if err != nil {
			return nil, fmt.Errorf("get %s: %w", q, err)
		}
		if !ok {
			return nil, fmt.Errorf("get %s: queue empty", q)
		}
		if err := d.Ack(false); err != nil {
			return nil, err
		}
	}
	got := time.Now()
	return figures{
		"total":   millis(got.Sub(start)),
		"declare": millis(declared.Sub(start)),
		"publish": millis(published.Sub(declared)),
		"get":     millis(got.Sub(published)),
	}, nil
}

// awaitConfirm waits for the next confirmation and fails on a nack, a closed
// channel or a minute without one.
func awaitConfirm(ctx context.Context, confirms <-chan amqp.Confirmation) error {
	select {
	case c, ok := <-confirms:
		if !ok {
			return fmt.Errorf("channel closed while waiting for confirms")
		}
		if !c.Ack {
			return fmt.Errorf("publish %d nacked", c.DeliveryTag)
		}
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("no confirm within a minute")
	case <-ctx.Done():
		return ctx.Err()
	}
}
