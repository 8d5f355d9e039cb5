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
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	// The client's own limit is set above the benchmark's window so the
	// window, not the client's stall timer, paces the publisher.
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(4 * unacked))
	if err != nil {
		return nil, err
	}
	name := s.uniqueName("BENCH")
	subject := name + ".in"
	if _, err := js.AddStream(&nats.StreamConfig{Name: name, Subjects: []string{subject}, Storage: nats.FileStorage}); err != nil {
		return nil, fmt.Errorf("add stream: %w", err)
	}
	defer js.DeleteStream(name)

	body := make([]byte, bodySize)
	rand.Read(body)
	w := s.newWindow()
	// Futures wait here in publish order; the channel's capacity is the
	// window, so the publisher blocks while that many await their acks.
	pending := make(chan nats.PubAckFuture, unacked-1)
	acked := make(chan int64, 1)
	var ackErr errOnce
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
	n := <-acked
	if err := ackErr.get(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return figures{"rate": float64(n) / w.seconds()}, nil
}
