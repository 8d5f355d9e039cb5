package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// runJetStream publishes bodySize messages to a new file-storage stream
// with js.PublishAsync, at most unacked unacknowledged, until the window
// ends, and reports acknowledged messages per second ("rate").
func (s *suite) runJetStream(ctx context.Context, url string, bodySize, unacked int) (figures, error) {
	return s.runJetStreamPublishers(ctx, url, bodySize, unacked, 1)
}

// runJetStreamPublishers is runJetStream with several publishers, each on
// its own connection with its own window, to one stream: the rate is
// theirs together.
func (s *suite) runJetStreamPublishers(ctx context.Context, url string, bodySize, unacked, publishers int) (figures, error) {
	admin, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	adminJS, err := admin.JetStream()
	if err != nil {
		return nil, err
	}
	name := s.uniqueName("BENCH")
	subject := name + ".in"
	if _, err := adminJS.AddStream(&nats.StreamConfig{Name: name, Subjects: []string{subject}, Storage: nats.FileStorage}); err != nil {
		return nil, fmt.Errorf("add stream: %w", err)
	}
	defer adminJS.DeleteStream(name)

	body := make([]byte, bodySize)
	rand.Read(body)
	w := s.newWindow()
	var ackErr errOnce
	counts := make(chan int64, publishers)
	for range publishers {
		nc, err := nats.Connect(url)
		if err != nil {
			return nil, err
		}
		defer nc.Close()
		// The client's own limit is set above the benchmark's window so
		// the window, not the client's stall timer, paces the publisher.
		js, err := nc.JetStream(nats.PublishAsyncMaxPending(4 * unacked))
		if err != nil {
			return nil, err
		}
		go func() { counts <- publishInWindow(ctx, js, subject, body, unacked, w, &ackErr) }()
	}
	var n int64
	for range publishers {
		n += <-counts
	}
	if err := ackErr.get(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return figures{"rate": float64(n) / w.seconds()}, nil
}

// publishInWindow publishes body to subject until the window ends, with
// at most unacked awaiting acks, and returns the acks that came inside
// the window.
func publishInWindow(ctx context.Context, js nats.JetStreamContext, subject string, body []byte, unacked int, w window, ackErr *errOnce) int64 {
	// Futures wait here in publish order; the channel's capacity is the
	// window, so the publisher blocks while that many await their acks.
	pending := make(chan nats.PubAckFuture, unacked-1)
	acked := make(chan int64, 1)
	go func() {
		var n int64
		for f := range pending {
			select {
			case <-f.Ok():
				if w.contains(time.Now()) {
					n++
				}
			case err := <-f.Err():
				ackErr.set(err)
			case <-time.After(time.Minute):
				ackErr.set(fmt.Errorf("no ack within a minute"))
			}
		}
		acked <- n
	}()
	for time.Now().Before(w.end) && ctx.Err() == nil && ackErr.get() == nil {
		f, err := js.PublishAsync(subject, body)
		if err != nil {
			ackErr.set(err)
			break
		}
		pending <- f
	}
	close(pending)
	return <-acked
}
