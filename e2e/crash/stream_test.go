package crash

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
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
	// readTopic also checks that the offsets are dense and none is read twice.
	log := readTopic(t, b.addr, newAdmin(t, b.addr), stream)[0]
	offsets := slices.Sorted(maps.Keys(log))
	got := make([]string, len(offsets))
	for i, off := range offsets {
		got[i] = log[off]
	}
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
