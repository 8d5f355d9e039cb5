package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// runCorePubSub publishes bodySize messages flat out from one nats.go
// connection to subscribers subscribers, each on its own connection, and
// reports the messages each subscriber received per second inside the
// window ("rate", averaged over the subscribers). Core NATS is
// at-most-once: a subscriber that falls behind loses messages (in its
// client or, past the server's max_pending, its connection), which lowers
// the rate rather than queueing.
func (s *suite) runCorePubSub(ctx context.Context, url string, bodySize, subscribers int) (figures, error) {
	subject := s.uniqueName("core")
	w := s.newWindow()
	var received atomic.Int64
	var asyncErr errOnce
	for range subscribers {
		nc, err := nats.Connect(url, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if !errors.Is(err, nats.ErrSlowConsumer) {
				asyncErr.set(err)
			}
		}))
		if err != nil {
			return nil, err
		}
		defer nc.Close()
		if _, err := nc.Subscribe(subject, func(*nats.Msg) {
			if w.contains(time.Now()) {
				received.Add(1)
			}
		}); err != nil {
			return nil, err
		}
		if err := nc.Flush(); err != nil {
			return nil, err
		}
	}
	pub, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer pub.Close()
	body := make([]byte, bodySize)
	for i := 0; ; i++ {
		// The clock is read every 256 messages only: at 16 B it would
		// otherwise be a fair share of the publisher's work.
		if i%256 == 0 && (!time.Now().Before(w.end) || ctx.Err() != nil) {
			break
		}
		if err := pub.Publish(subject, body); err != nil {
			return nil, err
		}
	}
	if err := pub.Flush(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := asyncErr.get(); err != nil {
		return nil, err
	}
	return figures{"rate": float64(received.Load()) / float64(subscribers) / w.seconds()}, nil
}

// runCoreRequestReply sends 16 B requests one after the other to a
// responder on another connection until the window ends and reports the
// round trips per second ("rate") and their latency ("p50", "p99", ms).
func (s *suite) runCoreRequestReply(ctx context.Context, url string) (figures, error) {
	subject := s.uniqueName("service")
	responder, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer responder.Close()
	if _, err := responder.Subscribe(subject, func(m *nats.Msg) { m.Respond(m.Data) }); err != nil {
		return nil, err
	}
	if err := responder.Flush(); err != nil {
		return nil, err
	}
	requester, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer requester.Close()
	body := make([]byte, 16)
	w := s.newWindow()
	var samples latencies
	for {
		start := time.Now()
		if !start.Before(w.end) || ctx.Err() != nil {
			break
		}
		if _, err := requester.Request(subject, body, 5*time.Second); err != nil {
			return nil, fmt.Errorf("request: %w", err)
		}
		if w.contains(start) {
			samples = append(samples, time.Since(start))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return figures{
		"rate": float64(len(samples)) / w.seconds(),
		"p50":  millis(percentile(samples, 0.50)),
		"p99":  millis(percentile(samples, 0.99)),
	}, nil
}
