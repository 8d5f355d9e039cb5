package crash

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStreamQueueCrashKeepsConfirmedMessages kills the broker while
// amqp091-go publishers with confirms write to an AMQP stream queue, whose
// publishes the broker batches per connection, and reads the stream back
// as the Kafka topic it is: every confirmed message must be there exactly
// once, each publisher's messages in the order they were published.
func TestStreamQueueCrashKeepsConfirmedMessages(t *testing.T) {
	const (
		stream     = "crash-stream"
		publishers = 2
		window     = 256 // unconfirmed messages per publisher
	)
	h := newHarness(t)
	h.amqp = true
	b := h.start()
	_, ch, err := dialAMQP(b.amqpAddr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(stream, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatalf("declare stream: %v", err)
	}

	var (
		mu        sync.Mutex
		confirmed = map[string]bool{}
		wg        sync.WaitGroup
	)
	for p := range publishers {
		wg.Go(func() {
			conn, ch, err := dialAMQP(b.amqpAddr)
			if err != nil {
				t.Errorf("publisher %d: %v", p, err)
				return
			}
			defer conn.Close()
			if err := ch.Confirm(false); err != nil {
				t.Errorf("publisher %d: confirm.select: %v", p, err)
				return
			}
			// Until the broker dies: publish with at most window
			// unconfirmed, recording every id the broker acked.
			var pending []*amqp.DeferredConfirmation
			var ids []string
			for seq := 0; ; seq++ {
				id := fmt.Sprintf("p%d-%08d", p, seq)
				dc, err := ch.PublishWithDeferredConfirm("", stream, false, false, amqp.Publishing{Body: []byte(id)})
				if err != nil {
					return // the broker was killed
				}
				pending, ids = append(pending, dc), append(ids, id)
				if len(pending) < window {
					continue
				}
				// A closed channel resolves its pending confirmations as
				// nacks: those are simply not counted as confirmed.
				if pending[0].Wait() {
					mu.Lock()
					confirmed[ids[0]] = true
					mu.Unlock()
				}
				pending, ids = pending[1:], ids[1:]
			}
		})
	}
	time.Sleep(h.loadDuration(time.Second, 2*time.Second)) // load runs while we wait: nothing to poll
	b.kill()
	wg.Wait()
	mu.Lock()
	total := len(confirmed)
	mu.Unlock()
	if total == 0 {
		t.Fatalf("no message was confirmed before the kill\n%s", b.logTail())
	}

	b = h.start()
	got := readStream(t, b.addr, stream)
	lastSeq := map[int]int{}
	seen := map[string]bool{}
	for _, id := range got {
		var p, seq int
		if _, err := fmt.Sscanf(id, "p%d-%d", &p, &seq); err != nil {
			t.Fatalf("unexpected record %q in the stream", id)
		}
		if seen[id] {
			t.Errorf("%s is in the stream twice", id)
		}
		seen[id] = true
		if last, ok := lastSeq[p]; ok && seq <= last {
			t.Errorf("%s follows p%d-%08d: out of order", id, p, last)
		}
		lastSeq[p] = seq
	}
	lost := 0
	for id := range confirmed {
		if !seen[id] {
			lost++
		}
	}
	t.Logf("confirmed %d, read back %d, lost %d", total, len(got), lost)
	if lost > 0 {
		t.Fatalf("%d confirmed messages are missing after the restart", lost)
	}
	b.stop()
}

// readStream reads every record of the stream's Kafka topic (partition 0)
// up to its high watermark and returns the values in offset order.
func readStream(t *testing.T, addr, topic string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends := listOffsets(t, ctx, newAdmin(t, addr).ListEndOffsets, topic)
	end := ends[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var values []string
	for next := int64(0); next < end; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s back: %v at offset %d of %d", topic, ctx.Err(), next, end)
		}
		fetches.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch %s: %v", topic, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			values = append(values, string(r.Value))
			next = r.Offset + 1
		})
	}
	return values
}
