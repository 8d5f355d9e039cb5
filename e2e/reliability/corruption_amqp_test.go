package reliability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/nodetest"
	"github.com/wharf-mq/wharf/internal/record"
)

// Queues of TestQueueCorruptionThroughTheNode.
const (
	flippedMessagesQueue = "flipped-messages" // a byte flipped in its messages log
	flippedSettledQueue  = "flipped-settled"  // a byte flipped in its settlement log
	intactQueue          = "intact"
	queueCorruptMessages = 300 // persistent, confirmed, per queue
)

// crashedText is what RabbitMQ answers for a queue that crashed on its
// data, and Wharf for one whose logs are damaged.
const crashedText = "has crashed and failed to restart"

// TestQueueCorruptionThroughTheNode flips a byte in durable queues' logs
// of a stopped node: in the middle of one queue's messages log, and in the
// first record of another's settlement log. Recovery trusts logs closed
// cleanly, so neither is found at Open by seglog; the settlement log fails
// when mq reads it back, the messages log when the queue scrubber reaches
// it. Either way only that queue is taken out of service, through
// amqp091-go:
//
//   - the node starts and the Kafka topic and the intact queue serve
//     everything acknowledged;
//   - queue.declare (passive) and basic.get on a damaged queue close their
//     channel with 404 NOT_FOUND "... has crashed and failed to restart"
//     (the flipped messages log within 20 s of the start, when the
//     scrubber reaches it); the connection stays open and serves the
//     intact queue;
//   - a message published to a damaged queue in confirm mode is nacked;
//   - the broker log names each queue.
func TestQueueCorruptionThroughTheNode(t *testing.T) {
	const topic = "beside-queues"
	dataDir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir), newNodeLog(t, slog.LevelWarn).option())
	createTopic(t, n.KafkaAddr(), topic, 1, nil)
	acked := produceEach(t, n.KafkaAddr(), topic, 1)
	url := nodetest.AMQPURL(n)
	dirs := map[string]string{}
	for _, q := range []string{flippedMessagesQueue, flippedSettledQueue, intactQueue} {
		dirs[q] = declareAndFill(t, url, dataDir, q, queueCorruptMessages)
	}
	settled := filepath.Join(dirs[flippedSettledQueue], "settled")
	takeInRounds(t, url, flippedSettledQueue, settled, 3, 10)
	closeNode(t, n)

	messagesFile := lastSegment(t, filepath.Join(dirs[flippedMessagesQueue], "messages"))
	pos := batchPositions(t, messagesFile)
	flipByte(t, messagesFile, pos[len(pos)/2]+record.HeaderSize+20)
	settledFile := lastSegment(t, settled)
	flipByte(t, settledFile, batchPositions(t, settledFile)[0]+record.HeaderSize+1)

	logs := newNodeLog(t, slog.LevelInfo)
	n = nodetest.Start(t, nodetest.WithDataDir(dataDir), logs.option())
	url = nodetest.AMQPURL(n)
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("amqp dial: %v", err)
	}
	defer conn.Close()

	// The damaged queues, the settlement log's at once, the messages
	// log's once the scrubber gets there.
	requireCrashed(t, conn, flippedSettledQueue, time.Second)
	requireCrashed(t, conn, flippedMessagesQueue, 20*time.Second)
	for _, q := range []string{flippedSettledQueue, flippedMessagesQueue} {
		if lines := logs.find("level=ERROR", "queue out of service", "queue="+q); len(lines) == 0 {
			t.Errorf("no broker log line says queue %s is out of service", q)
		} else {
			t.Logf("broker log: %s", lines[0])
		}
		requireNacked(t, conn, q)
	}
	if conn.IsClosed() {
		t.Fatal("the damaged queues' errors closed the connection")
	}

	// Everything else serves.
	ld := &amqpLoad{queues: []string{intactQueue}, published: map[string]string{}}
	for seq := range queueCorruptMessages {
		id := amqpID(0, seq)
		ld.published[id] = intactQueue
		ld.confirmed = append(ld.confirmed, amqpConfirm{id: id, queue: intactQueue})
	}
	if c := checkAMQP(newReporter(t, "intact queue"), ld, drainQueues(t, url, ld.queues)); c.checked != queueCorruptMessages || !c.ok() {
		t.Errorf("intact queue: %s", c)
	}
	logsBack := readTopic(t, n.KafkaAddr(), topic)
	for _, a := range acked {
		if got := logsBack[a.partition][a.offset]; got != a.value {
			t.Fatalf("topic %s: %q acknowledged at %d, read back %q", topic, a.value, a.offset, got)
		}
	}
}

// declareAndFill declares a durable queue, publishes n confirmed
// persistent messages to it (ids amqpID(0, seq)) and returns the directory
// its logs went to (the one that appeared in DataDir/queues).
func declareAndFill(t *testing.T, url, dataDir, queue string, n int) string {
	t.Helper()
	queues := filepath.Join(dataDir, "queues")
	before, _ := os.ReadDir(queues)
	declareQueues(t, url, queue)
	ld := &amqpLoad{queues: []string{queue}, published: map[string]string{}}
	publishConfirmed(t, url, ld, 0, n)
	after, err := os.ReadDir(queues)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range after {
		if !slices.ContainsFunc(before, func(b os.DirEntry) bool { return b.Name() == e.Name() }) {
			return filepath.Join(queues, e.Name())
		}
	}
	t.Fatalf("no queue directory appeared for %s", queue)
	return ""
}

// takeInRounds takes perRound messages of queue with basic.get (no ack)
// rounds times, each time waiting until the settlement log in dir holds
// one more batch, so that it ends up with rounds batches.
func takeInRounds(t *testing.T, url, queue, dir string, rounds, perRound int) {
	t.Helper()
	conn, ch := dialChannel(t, url)
	defer conn.Close()
	for round := 1; round <= rounds; round++ {
		for range perRound {
			if _, ok, err := ch.Get(queue, true); err != nil || !ok {
				t.Fatalf("get from %s: %v %v", queue, ok, err)
			}
		}
		if !waitFor(10*time.Second, func() bool { return batchCount(filepath.Join(dir, fmt.Sprintf("%020d.log", 0))) >= round }) {
			t.Fatalf("the settlement log of %s did not reach %d batches", queue, round)
		}
	}
}

// batchCount is how many whole batches the segment file holds (0 if it
// cannot be read).
func batchCount(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil {
			break
		}
		n++
		data = data[h.Size():]
	}
	return n
}

// requireCrashed waits up to within for queue.declare (passive) of queue
// to fail with 404 "... has crashed and failed to restart" on its channel,
// then requires the same of basic.get and that the connection stays open.
func requireCrashed(t *testing.T, conn *amqp.Connection, queue string, within time.Duration) {
	t.Helper()
	var last error
	crashed := func(op func(*amqp.Channel) error) bool {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatalf("open a channel: %v", err)
		}
		defer ch.Close()
		last = op(ch)
		var ae *amqp.Error
		return errors.As(last, &ae) && ae.Code == amqp.NotFound && strings.Contains(ae.Reason, crashedText)
	}
	declare := func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		return err
	}
	if !waitFor(within, func() bool { return crashed(declare) }) {
		t.Fatalf("queue %s: passive declare got %v within %v, want 404 ... %s", queue, last, within, crashedText)
	}
	t.Logf("queue %s: %v", queue, last)
	if !crashed(func(ch *amqp.Channel) error { _, _, err := ch.Get(queue, true); return err }) {
		t.Errorf("queue %s: basic.get got %v, want 404 ... %s", queue, last, crashedText)
	}
	if conn.IsClosed() {
		t.Fatalf("queue %s: the error closed the connection", queue)
	}
}

// requireNacked publishes a persistent message to queue in confirm mode
// and requires a nack.
func requireNacked(t *testing.T, conn *amqp.Connection, queue string) {
	t.Helper()
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		t.Fatalf("confirm channel: %v", err)
	}
	defer ch.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("to a damaged queue")})
	if err != nil {
		t.Fatalf("publish to %s: %v", queue, err)
	}
	if ok, err := dc.WaitContext(ctx); err != nil || ok {
		t.Errorf("publish to damaged queue %s: ack %v (%v), want a nack", queue, ok, err)
	}
}
