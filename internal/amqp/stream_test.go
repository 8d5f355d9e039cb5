package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/mq"
)

// End-to-end tests of stream queues: amqp091-go and franz-go clients over
// TCP against one broker core, whose topics back the stream queues (the
// broker passes its own StreamStore to its mq registry).

// streamStack is a broker with a Kafka listener and an AMQP listener whose
// registry has stream queues on the broker's topics.
type streamStack struct {
	t      *testing.T
	dir    string
	logs   *testLogWriter
	logger *slog.Logger

	b                   *broker.Broker
	reg                 *mq.Registry
	amqpSrv             *Server
	kafkaSrv            *kafka.Server
	amqpAddr, kafkaAddr string
	served              chan error
}

func startStreamStack(t *testing.T) *streamStack {
	s := &streamStack{t: t, dir: t.TempDir(), logs: &testLogWriter{t: t}}
	s.logger = slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s.start()
	t.Cleanup(func() {
		s.stop()
		s.logs.stop()
	})
	return s
}

func (s *streamStack) start() {
	t := s.t
	t.Helper()
	b, err := broker.Open(broker.Config{DataDir: filepath.Join(s.dir, "broker"), Logger: s.logger})
	if err != nil {
		t.Fatal(err)
	}
	reg := b.Messaging()
	kln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.b, s.reg = b, reg
	s.kafkaSrv = kafka.NewServer(b, kafka.Config{AdvertisedHost: "127.0.0.1",
		AdvertisedPort: int32(kln.Addr().(*net.TCPAddr).Port), Logger: s.logger})
	s.amqpSrv = NewServer(reg, Config{Logger: s.logger})
	s.kafkaAddr, s.amqpAddr = kln.Addr().String(), aln.Addr().String()
	s.served = make(chan error, 2)
	go func() { s.served <- s.kafkaSrv.Serve(kln) }()
	go func() { s.served <- s.amqpSrv.Serve(aln) }()
}

func (s *streamStack) stop() {
	if s.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := s.amqpSrv.Shutdown(ctx); err != nil {
		s.t.Errorf("amqp shutdown: %v", err)
	}
	if err := s.kafkaSrv.Shutdown(ctx); err != nil {
		s.t.Errorf("kafka shutdown: %v", err)
	}
	for range 2 {
		if err := <-s.served; err != nil {
			s.t.Errorf("serve: %v", err)
		}
	}
	if err := s.b.Close(); err != nil {
		s.t.Errorf("close broker: %v", err)
	}
	s.b = nil
}

func (s *streamStack) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

// channel opens a channel on a new amqp091-go connection.
func (s *streamStack) channel() *amqp091.Channel {
	s.t.Helper()
	conn, err := amqp091.DialConfig("amqp://guest:guest@"+s.amqpAddr+"/", amqp091.Config{Dial: amqp091.DefaultDial(testTimeout)})
	if err != nil {
		s.t.Fatalf("dial: %v", err)
	}
	s.t.Cleanup(func() { conn.Close() })
	return openChannel(s.t, conn)
}

func (s *streamStack) kafkaClient(opts ...kgo.Opt) *kgo.Client {
	s.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.kafkaAddr)}, opts...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(cl.Close)
	return cl
}

func declareStream(t *testing.T, ch *amqp091.Channel, name string, args amqp091.Table) {
	t.Helper()
	all := amqp091.Table{"x-queue-type": "stream"}
	for k, v := range args {
		all[k] = v
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, all); err != nil {
		t.Fatalf("declare stream %q: %v", name, err)
	}
}

// consumeStream sets a consumer prefetch and consumes from offset.
func consumeStream(t *testing.T, ch *amqp091.Channel, queue string, prefetch int, offset any) <-chan amqp091.Delivery {
	t.Helper()
	if err := ch.Qos(prefetch, 0, false); err != nil {
		t.Fatal(err)
	}
	d, err := ch.Consume(queue, "", false, false, false, false, amqp091.Table{"x-stream-offset": offset})
	if err != nil {
		t.Fatalf("consume %q from %v: %v", queue, offset, err)
	}
	return d
}

func TestStreamQueueReadFromFirstAfterRestart(t *testing.T) {
	s := startStreamStack(t)
	ch := s.channel()
	declareStream(t, ch, "orders", amqp091.Table{"x-max-age": "7D"})
	pub := newConfirmedPublisher(t, ch)
	for i := range 3 {
		if !pub.publish("", "orders", amqp091.Publishing{Body: body(i), MessageId: fmt.Sprint("m", i),
			Headers: amqp091.Table{"seq": int64(i)}}) {
			t.Fatalf("message %d nacked", i)
		}
	}

	s.restart()

	ch = s.channel()
	q, err := ch.QueueDeclarePassive("orders", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
	if err != nil || q.Messages != 3 {
		t.Fatalf("after restart: %+v, %v", q, err)
	}
	deliveries := consumeStream(t, ch, "orders", 2, "first")
	for i := range 3 {
		d := next(t, deliveries)
		if string(d.Body) != string(body(i)) || d.MessageId != fmt.Sprint("m", i) || d.Headers["seq"] != int64(i) {
			t.Fatalf("delivery %d: %q id %q headers %v", i, d.Body, d.MessageId, d.Headers)
		}
		if d.Headers["x-stream-offset"] != int64(i) || d.Exchange != "" || d.RoutingKey != "orders" {
			t.Fatalf("delivery %d: offset %v exchange %q key %q", i, d.Headers["x-stream-offset"], d.Exchange, d.RoutingKey)
		}
		if err := d.Ack(false); err != nil { // acks only return credit (prefetch 2 < 3 messages)
			t.Fatal(err)
		}
	}
	// Acknowledged stream messages stay.
	if q, err := ch.QueueDeclarePassive("orders", true, false, false, false, nil); err != nil || q.Messages != 3 {
		t.Fatalf("after acks: %+v, %v", q, err)
	}
}

func TestStreamQueueBridgeBetweenKafkaAndAMQP(t *testing.T) {
	s := startStreamStack(t)
	ch := s.channel()
	declareStream(t, ch, "bridge", nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// Kafka to AMQP.
	producer := s.kafkaClient()
	rec := &kgo.Record{Topic: "bridge", Key: []byte("customer-7"), Value: []byte("from kafka"), Headers: []kgo.RecordHeader{
		{Key: "trace-id", Value: []byte("t-1")},
		{Key: "amqp.content-type", Value: []byte("text/plain")},
	}}
	if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	deliveries := consumeStream(t, ch, "bridge", 10, "first")
	d := next(t, deliveries)
	if string(d.Body) != "from kafka" || d.ContentType != "text/plain" || d.Headers["trace-id"] != "t-1" ||
		d.Headers["x-kafka-key"] != "customer-7" || d.Headers["x-stream-offset"] != int64(0) || d.RoutingKey != "bridge" {
		t.Fatalf("AMQP got %q content-type %q key %q headers %v", d.Body, d.ContentType, d.RoutingKey, d.Headers)
	}

	// AMQP to Kafka.
	pub := newConfirmedPublisher(t, s.channel())
	if !pub.publish("", "bridge", amqp091.Publishing{
		Body: []byte("from amqp"), ContentType: "application/json", MessageId: "id-9", CorrelationId: "c-9",
		DeliveryMode: amqp091.Persistent, Priority: 3, Timestamp: time.Unix(1_700_000_000, 0),
		Headers: amqp091.Table{"trace-id": "t-2", "attempt": int32(4), "x-kafka-key": "customer-8"},
	}) {
		t.Fatal("publish nacked")
	}
	consumer := s.kafkaClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"bridge": {0: kgo.NewOffset().At(1)},
	}))
	fetches := consumer.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	recs := fetches.Records()
	if len(recs) != 1 {
		t.Fatalf("Kafka got %d records", len(recs))
	}
	got := recs[0]
	headers := map[string]string{}
	for _, h := range got.Headers {
		headers[h.Key] = string(h.Value)
	}
	want := map[string]string{
		"trace-id": "t-2", "attempt": "4", "amqp.content-type": "application/json", "amqp.message-id": "id-9",
		"amqp.correlation-id": "c-9", "amqp.delivery-mode": "2", "amqp.priority": "3",
		"amqp.timestamp": "1700000000", "amqp.exchange": "", "amqp.routing-key": "bridge",
	}
	for k, v := range want {
		if hv, ok := headers[k]; !ok || hv != v {
			t.Errorf("Kafka header %s = %q (present %v), want %q", k, hv, ok, v)
		}
	}
	if string(got.Value) != "from amqp" || string(got.Key) != "customer-8" || got.Offset != 1 {
		t.Errorf("Kafka got value %q key %q offset %d", got.Value, got.Key, got.Offset)
	}

	// And the AMQP consumer sees the AMQP message with its types intact.
	d = next(t, deliveries)
	if d.Headers["attempt"] != int32(4) || d.Headers["x-kafka-key"] != "customer-8" || d.Priority != 3 || d.CorrelationId != "c-9" {
		t.Fatalf("AMQP round trip: headers %v priority %d correlation %q", d.Headers, d.Priority, d.CorrelationId)
	}
}

func TestStreamQueueProtocolRules(t *testing.T) {
	s := startStreamStack(t)
	ch := s.channel()
	declareStream(t, ch, "retained", amqp091.Table{"x-max-age": "2h", "x-max-length-bytes": int64(5_000_000),
		"x-stream-max-segment-size-bytes": int64(1_000_000)})
	top, err := s.b.Topic("retained")
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]string{}
	for _, c := range top.Configs() {
		configs[c.Name] = c.Value
	}
	if configs["retention.ms"] != "7200000" || configs["retention.bytes"] != "5000000" || configs["segment.bytes"] != "1000000" {
		t.Fatalf("topic configs %v", configs)
	}
	if n := len(top.Partitions()); n != 1 {
		t.Fatalf("%d partitions", n)
	}

	// A stream must be durable.
	_, err = s.channel().QueueDeclare("transient", false, false, false, false, amqp091.Table{"x-queue-type": "stream"})
	wantCode(t, err, 406)

	// Consuming needs a consumer prefetch.
	_, err = s.channel().Consume("retained", "", false, false, false, false, nil)
	if e := wantCode(t, err, 406); e.Reason != "PRECONDITION_FAILED - consumer prefetch count is not set for stream queue 'retained' in vhost '/'" {
		t.Fatalf("reason %q", e.Reason)
	}

	// basic.get is not implemented for streams: a connection error.
	_, _, err = s.channel().Get("retained", false)
	wantCode(t, err, 540)

	// Deleting the queue deletes the topic.
	if _, err := ch.QueueDelete("retained", false, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.b.Topic("retained"); !errors.Is(err, broker.ErrUnknownTopic) {
		t.Fatalf("topic after queue.delete: %v", err)
	}
}
