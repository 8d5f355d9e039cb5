package e2e

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/wharf-mq/wharf/internal/node"
)

// kafkaGoCreateTopic creates a topic through kafka-go's Conn, which is how
// kafka-go users do it.
func kafkaGoCreateTopic(t *testing.T, n *node.Node, topic string, partitions int) {
	t.Helper()
	conn, err := kafka.DialContext(testContext(t), "tcp", n.KafkaAddr())
	if err != nil {
		t.Fatalf("kafka.Dial(%s): %v", n.KafkaAddr(), err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	if err := conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}); err != nil {
		t.Fatalf("kafka-go Conn.CreateTopics(%q, %d partitions): %v", topic, partitions, err)
	}
}

// TestKafkaGoWriterReader writes 500 keyed messages with kafka-go's Writer
// (acks=all, hash balancer) and reads every partition back with a
// partition Reader (no consumer group) from the first offset.
func TestKafkaGoWriterReader(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	const (
		topic      = "kafkago-writer"
		partitions = 3
		keys       = 50
		perKey     = 10
	)
	kafkaGoCreateTopic(t, n, topic, partitions)

	w := &kafka.Writer{
		Addr:         kafka.TCP(n.KafkaAddr()),
		Topic:        topic,
		RequiredAcks: kafka.RequireAll,
		Balancer:     &kafka.Hash{},
		BatchTimeout: 10 * time.Millisecond,
	}
	defer w.Close()
	var msgs []kafka.Message
	for seq := 0; seq < perKey; seq++ {
		for k := 0; k < keys; k++ {
			msgs = append(msgs, kafka.Message{
				Key:   fmt.Appendf(nil, "key-%02d", k),
				Value: fmt.Appendf(nil, "key-%02d/seq-%02d", k, seq),
			})
		}
	}
	if err := w.WriteMessages(testContext(t), msgs...); err != nil {
		t.Fatalf("Writer.WriteMessages(%d messages): %v", len(msgs), err)
	}

	// Where the hash balancer must have put each message, in write order.
	want := make(map[int][]string)
	all := []int{0, 1, 2}
	for _, m := range msgs {
		p := (&kafka.Hash{}).Balance(m, all...)
		want[p] = append(want[p], string(m.Value))
	}

	for p := 0; p < partitions; p++ {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   []string{n.KafkaAddr()},
			Topic:     topic,
			Partition: p,
			MaxWait:   500 * time.Millisecond,
		})
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			t.Fatalf("Reader.SetOffset(FirstOffset): %v", err)
		}
		ctx := testContext(t)
		for i, wantValue := range want[p] {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("partition %d: ReadMessage %d of %d: %v", p, i, len(want[p]), err)
			}
			if m.Partition != p || m.Offset != int64(i) || string(m.Value) != wantValue {
				t.Fatalf("partition %d: message %d is %q at %d/%d, want %q at %d/%d (write order per partition, hash balancer placement)",
					p, i, m.Value, m.Partition, m.Offset, wantValue, p, i)
			}
			if !strings.HasPrefix(wantValue, string(m.Key)+"/") {
				t.Fatalf("partition %d offset %d: key %q does not belong to value %q", p, i, m.Key, m.Value)
			}
		}
		r.Close()
	}

	// Nothing extra was written.
	for p := 0; p < partitions; p++ {
		conn, err := kafka.DialLeader(testContext(t), "tcp", n.KafkaAddr(), topic, p)
		if err != nil {
			t.Fatalf("DialLeader(%q, %d): %v", topic, p, err)
		}
		conn.SetDeadline(time.Now().Add(testTimeout))
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatalf("partition %d: ReadLastOffset: %v", p, err)
		}
		if last != int64(len(want[p])) {
			t.Errorf("partition %d: last offset %d, want %d (messages hashed there)", p, last, len(want[p]))
		}
	}
}

// TestKafkaGoConn drives kafka-go's low-level Conn: CreateTopics,
// ReadPartitions, produce, first/last offsets, a batch read, and a long
// poll that is answered by a write made after the fetch was sent.
func TestKafkaGoConn(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	const topic = "kafkago-conn"
	kafkaGoCreateTopic(t, n, topic, 2)

	conn, err := kafka.DialContext(testContext(t), "tcp", n.KafkaAddr())
	if err != nil {
		t.Fatalf("kafka.Dial: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	parts, err := conn.ReadPartitions(topic)
	if err != nil {
		t.Fatalf("ReadPartitions(%q): %v", topic, err)
	}
	if len(parts) != 2 {
		t.Fatalf("ReadPartitions(%q): %d partitions %+v, want 2", topic, len(parts), parts)
	}
	for i, p := range parts {
		leader := net.JoinHostPort(p.Leader.Host, fmt.Sprint(p.Leader.Port))
		if p.Topic != topic || p.ID != i || leader != n.AdvertisedKafkaAddr() {
			t.Errorf("ReadPartitions(%q)[%d] = topic %q id %d leader %s, want topic %q id %d leader %s",
				topic, i, p.Topic, p.ID, leader, topic, i, n.AdvertisedKafkaAddr())
		}
	}

	leader0 := dialLeader(t, n, topic, 0)
	if _, err := leader0.WriteMessages(
		kafka.Message{Value: []byte("m0")}, kafka.Message{Value: []byte("m1")}, kafka.Message{Value: []byte("m2")},
		kafka.Message{Value: []byte("m3")}, kafka.Message{Value: []byte("m4")},
	); err != nil {
		t.Fatalf("Conn.WriteMessages: %v", err)
	}
	first, err := leader0.ReadFirstOffset()
	if err != nil || first != 0 {
		t.Errorf("ReadFirstOffset = %d, %v; want 0", first, err)
	}
	last, err := leader0.ReadLastOffset()
	if err != nil || last != 5 {
		t.Errorf("ReadLastOffset = %d, %v; want 5", last, err)
	}
	if _, err := leader0.Seek(0, kafka.SeekAbsolute); err != nil {
		t.Fatalf("Seek(0): %v", err)
	}
	batch := leader0.ReadBatch(1, 1<<20)
	for i := range 5 {
		m, err := batch.ReadMessage()
		if err != nil {
			t.Fatalf("batch.ReadMessage %d: %v", i, err)
		}
		if want := fmt.Sprintf("m%d", i); string(m.Value) != want || m.Offset != int64(i) {
			t.Errorf("batch message %d: %q at offset %d, want %q at %d", i, m.Value, m.Offset, want, i)
		}
	}
	if err := batch.Close(); err != nil {
		t.Errorf("batch.Close: %v", err)
	}

	t.Run("long poll", func(t *testing.T) { kafkaGoLongPoll(t, n, topic) })
}

func dialLeader(t *testing.T, n *node.Node, topic string, partition int) *kafka.Conn {
	t.Helper()
	conn, err := kafka.DialLeader(testContext(t), "tcp", n.KafkaAddr(), topic, partition)
	if err != nil {
		t.Fatalf("DialLeader(%q, %d): %v", topic, partition, err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(testTimeout))
	return conn
}

// kafkaGoLongPoll sends a Fetch with a 10 s max wait on an empty partition
// and only then writes a message: the fetch must return that message, and
// well before its max wait (the broker wakes waiting fetches on append).
func kafkaGoLongPoll(t *testing.T, n *node.Node, topic string) {
	raw, err := net.Dial("tcp", n.KafkaAddr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	watched := &fetchWatchConn{Conn: raw, fetchSent: make(chan struct{})}
	poller := kafka.NewConnWith(watched, kafka.ConnConfig{Topic: topic, Partition: 1})
	defer poller.Close()
	poller.SetDeadline(time.Now().Add(testTimeout))
	if _, err := poller.Seek(0, kafka.SeekAbsolute); err != nil {
		t.Fatalf("Seek(0) on empty partition 1: %v", err)
	}

	const maxWait = 10 * time.Second
	type result struct {
		msg kafka.Message
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		batch := poller.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 1 << 20, MaxWait: maxWait})
		m, err := batch.ReadMessage()
		batch.Close()
		done <- result{m, err, time.Now()}
	}()

	select {
	case <-watched.fetchSent:
	case r := <-done:
		t.Fatalf("ReadBatch returned before its fetch was seen on the wire: %q, %v", r.msg.Value, r.err)
	case <-time.After(testTimeout):
		t.Fatalf("kafka-go never sent the Fetch request")
	}
	writer := dialLeader(t, n, topic, 1)
	wroteAt := time.Now()
	if _, err := writer.WriteMessages(kafka.Message{Value: []byte("late")}); err != nil {
		t.Fatalf("write after the fetch was sent: %v", err)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("long-poll read: %v", r.err)
		}
		if string(r.msg.Value) != "late" || r.msg.Offset != 0 {
			t.Errorf("long-poll read got %q at offset %d, want %q at 0", r.msg.Value, r.msg.Offset, "late")
		}
		if waited := r.at.Sub(wroteAt); waited > maxWait/2 {
			t.Errorf("long-poll read returned %v after the write; the broker should wake the fetch on append, not at its %v max wait", waited, maxWait)
		}
	case <-time.After(testTimeout):
		t.Fatalf("long-poll read did not return within %v of a write to its partition", testTimeout)
	}
}

// fetchWatchConn closes fetchSent the first time a Fetch request (API key
// 1) is written through it, so a test can order a write after the fetch.
type fetchWatchConn struct {
	net.Conn
	once      sync.Once
	fetchSent chan struct{}
}

func (c *fetchWatchConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	// A request is size(4) apiKey(2) ...; kafka-go writes a whole
	// request per Write through its bufio.Writer.
	if len(p) >= 6 && p[4] == 0 && p[5] == 1 {
		c.once.Do(func() { close(c.fetchSent) })
	}
	return n, err
}
