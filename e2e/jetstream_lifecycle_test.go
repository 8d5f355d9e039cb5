package e2e

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A client may name a JetStream API subject as the reply subject of a
// pull request: the server then sends the request's status messages (408
// Request Timeout, 409 Consumer Deleted), whose subject is the reply
// subject, to its own API. The request that arrives there must be served
// like any other, and must not stall the server (Wharf ran it on the
// goroutine that sent the status, which the request then waited for).
func TestJetStreamStatusToTheAPI(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		nc, js := connectJS(t, srv)
		s := createStream(t, js, jetstream.StreamConfig{Name: "LOOP"}, "one")
		if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "self", AckPolicy: jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverNewPolicy}); err != nil {
			t.Fatal(err)
		}
		// The request's 408 is a request to delete its consumer.
		if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.LOOP.self", "$JS.API.CONSUMER.DELETE.LOOP.self",
			[]byte(`{"batch":1,"expires":100000000}`)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "consumer self deleted by its request's 408", func() bool {
			_, err := s.Consumer(ctx, "self")
			return errors.Is(err, jetstream.ErrConsumerNotFound)
		})

		// A waiting request's 409 Consumer Deleted is a request to delete
		// the stream, sent while the consumer's deletion is under way.
		if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "waiter", AckPolicy: jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverNewPolicy}); err != nil {
			t.Fatal(err)
		}
		if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.LOOP.waiter", "$JS.API.STREAM.DELETE.LOOP",
			[]byte(`{"batch":1,"expires":60000000000}`)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the pull request waiting", func() bool {
			c, err := s.Consumer(ctx, "waiter")
			return err == nil && c.CachedInfo().NumWaiting == 1
		})
		if err := s.DeleteConsumer(ctx, "waiter"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "stream LOOP deleted by the 409 of its consumer's request", func() bool {
			_, err := js.Stream(ctx, "LOOP")
			return errors.Is(err, jetstream.ErrStreamNotFound)
		})
		// And the server goes on serving.
		createStream(t, js, jetstream.StreamConfig{Name: "AFTER"}, "x")
	})
}

// waitFor polls cond until it holds, failing the test after testTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, testTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Deleting a stream while its consumers deliver (a push consumer and a
// pull consumer, both mid-stream with acknowledgements in flight) ends
// them cleanly: the delete is answered, the consumers are gone, and a
// stream created again under the name starts empty, its new consumer
// getting only the new messages.
func TestJetStreamDeleteWhileDelivering(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		_, js := connectJS(t, srv)
		s := createStream(t, js, jetstream.StreamConfig{Name: "BUSY"})
		for i := range 2000 {
			if _, err := js.PublishAsync(fmt.Sprintf("busy.%d", i%10), []byte("old")); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			t.Fatal("publishes not acknowledged")
		}
		push, err := s.CreatePushConsumer(ctx, jetstream.ConsumerConfig{Durable: "push", DeliverSubject: "deliver.busy",
			AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 100})
		if err != nil {
			t.Fatal(err)
		}
		pull, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "pull", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		var received atomic.Int64
		handler := func(m jetstream.Msg) {
			received.Add(1)
			m.Ack()
		}
		pc, err := push.Consume(handler)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Stop()
		cc, err := pull.Consume(handler, jetstream.PullMaxMessages(50))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Stop()
		waitFor(t, "deliveries under way", func() bool { return received.Load() > 100 })

		if err := js.DeleteStream(ctx, "BUSY"); err != nil {
			t.Fatalf("delete the stream while it delivers: %v", err)
		}
		if _, err := js.Stream(ctx, "BUSY"); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("info of the deleted stream: %v", err)
		}
		s = createStream(t, js, jetstream.StreamConfig{Name: "BUSY"}, "new")
		info, err := s.Info(ctx)
		if err != nil || info.State.Msgs != 1 || info.State.FirstSeq != 1 || info.State.Consumers != 0 {
			t.Fatalf("the stream created again: %+v %v", info, err)
		}
		c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "pull", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		if m := fetchOne(t, c, 2*time.Second); m == nil || string(m.Data()) != "new" {
			t.Errorf("the new consumer got %v, want the new message", m)
		}
	})
}
