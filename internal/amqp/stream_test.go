package amqp

import (
	"bytes"
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

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/streambridge"
)

// End-to-end tests of stream queues: amqp091-go and franz-go clients over
// TCP against one broker core, whose topics back the stream queues (the
// registry's StreamStore is the stream bridge over the broker).

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
	reg, err := mq.Open(mq.Config{DataDir: b.DataDir(), Definitions: b.Definitions(),
		Streams: streambridge.NewTopics(b), Logger: s.logger})
	if err != nil {
		t.Fatal(err)
	}
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
	userStore, accessStore := newTestAuth(s.t)
	s.amqpSrv = NewServer(reg, Config{Logger: s.logger, Users: userStore, Access: accessStore})
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
	if err := s.reg.Close(); err != nil {
		s.t.Errorf("close registry: %v", err)
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

// A burst of confirmed publishes to a stream (which the connection appends
// in batches) is confirmed in order, each message exactly once; a message
// over the topic's max.message.bytes is nacked on its own. Stream and Kafka
// consumers see every accepted message once, in order, with its headers.
func TestStreamQueueConfirmedBurst(t *testing.T) {
	s := startStreamStack(t)
	ch := s.channel()
	declareStream(t, ch, "burst", nil)
	limit := "4000"
	if err := s.b.AlterTopicConfigs("burst", map[string]*string{"max.message.bytes": &limit}, true, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pch := s.channel()
	if err := pch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const n = 600
	const oversized = 317
	var confirms []*amqp091.DeferredConfirmation
	for i := range n {
		b := body(i)
		if i == oversized {
			b = bytes.Repeat([]byte("x"), 5000)
		}
		dc, err := pch.PublishWithDeferredConfirmWithContext(ctx, "", "burst", false, false, amqp091.Publishing{
			Body: b, DeliveryMode: amqp091.Persistent, MessageId: fmt.Sprint("m", i), Headers: amqp091.Table{"seq": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		confirms = append(confirms, dc)
	}
	for i, dc := range confirms {
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			t.Fatalf("confirm %d: %v", i, err)
		}
		if ok != (i != oversized) {
			t.Fatalf("message %d: ack %v", i, ok)
		}
	}

	// Every accepted message once, in publish order, with its headers.
	want := func(k int) int { // the publish index of the k-th stored message
		if k >= oversized {
			return k + 1
		}
		return k
	}
	deliveries := consumeStream(t, ch, "burst", 50, "first")
	for k := range n - 1 {
		d := next(t, deliveries)
		i := want(k)
		if string(d.Body) != string(body(i)) || d.MessageId != fmt.Sprint("m", i) || d.Headers["seq"] != int64(i) ||
			d.Headers["x-stream-offset"] != int64(k) {
			t.Fatalf("delivery %d: %q id %q headers %v", k, d.Body, d.MessageId, d.Headers)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	consumer := s.kafkaClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"burst": {0: kgo.NewOffset().AtStart()}}))
	for k := 0; k < n-1; {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		for _, r := range fetches.Records() {
			i := want(k)
			var seq, id string
			for _, h := range r.Headers {
				switch h.Key {
				case "seq":
					seq = string(h.Value)
				case "amqp.message-id":
					id = string(h.Value)
				}
			}
			if r.Offset != int64(k) || string(r.Value) != string(body(i)) || seq != fmt.Sprint(i) || id != fmt.Sprint("m", i) {
				t.Fatalf("Kafka record %d: offset %d value %q seq %q id %q", k, r.Offset, r.Value, seq, id)
			}
			k++
		}
	}
	if q, err := ch.QueueDeclarePassive("burst", true, false, false, false, nil); err != nil || q.Messages != n-1 {
		t.Fatalf("queue: %+v, %v", q, err)
	}
}

// Publishes that arrive in one burst are appended as record batches of
// several messages; their confirms still come in publish order, each tag
// once, and a message over the topic's max.message.bytes is nacked alone.
func TestStreamQueueBatchedPublishConfirms(t *testing.T) {
	s := startStreamStack(t)
	declareStream(t, s.channel(), "raw", nil)
	limit := "4000"
	if err := s.b.AlterTopicConfigs("raw", map[string]*string{"max.message.bytes": &limit}, true, false); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, s.amqpAddr, 0)
	c.openChannel(1)
	c.send(1, &amqpwire.ConfirmSelect{})
	c.expect(1, amqpwire.ConfirmSelectOKID)
	const n, oversized = 40, 21 // tag 21: the 21st publish
	for tag := 1; tag <= n; tag++ {
		b := body(tag)
		if tag == oversized {
			b = bytes.Repeat([]byte("x"), 5000)
		}
		props := &amqpwire.Properties{DeliveryMode: 2, Headers: amqpwire.Table{"tag": int64(tag)}}
		props.Present = amqpwire.FlagDeliveryMode | amqpwire.FlagHeaders
		if err := c.w.WriteContent(1, &amqpwire.BasicPublish{RoutingKey: "raw"}, props, b); err != nil {
			t.Fatal(err)
		}
	}
	c.flush() // one burst
	confirmed := 0
	for confirmed < n {
		switch m := mustMethod(t, c, 1).(type) {
		case *amqpwire.BasicAck:
			if m.DeliveryTag <= uint64(confirmed) || (!m.Multiple && m.DeliveryTag != uint64(confirmed+1)) {
				t.Fatalf("ack %d (multiple %v) after %d confirmed", m.DeliveryTag, m.Multiple, confirmed)
			}
			if confirmed < oversized && m.DeliveryTag >= oversized {
				t.Fatalf("ack up to %d covers the oversized message %d", m.DeliveryTag, oversized)
			}
			confirmed = int(m.DeliveryTag)
		case *amqpwire.BasicNack:
			if m.DeliveryTag != oversized || confirmed != oversized-1 {
				t.Fatalf("nack %d (multiple %v) after %d confirmed", m.DeliveryTag, m.Multiple, confirmed)
			}
			confirmed++
		default:
			t.Fatalf("got %T", m)
		}
	}

	part := streamPartition(t, s, "raw")
	if end := part.EndOffset(); end != n-1 {
		t.Fatalf("stream holds %d records, want %d", end, n-1)
	}
	batches := 0
	for off := int64(0); off < n-1; batches++ {
		sl, err := part.Read(off, 1)
		if err != nil {
			t.Fatal(err)
		}
		data, err := sl.Bytes()
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		h, err := record.ParseHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		off = h.LastOffset() + 1
	}
	if batches >= n-1 {
		t.Errorf("%d records in %d batches: the burst was not batched", n-1, batches)
	}
	deliveries := consumeStream(t, s.channel(), "raw", 100, "first")
	for k := range n - 1 {
		tag := k + 1
		if tag >= oversized {
			tag++
		}
		d := next(t, deliveries)
		if string(d.Body) != string(body(tag)) || d.Headers["tag"] != int64(tag) || d.Headers["x-stream-offset"] != int64(k) {
			t.Fatalf("delivery %d: %q headers %v", k, d.Body, d.Headers)
		}
	}
}

// mustMethod reads the next method, which must be on channel.
func mustMethod(t *testing.T, c *rawClient, channel uint16) amqpwire.Method {
	t.Helper()
	ch, m := c.readMethod()
	if ch != channel {
		t.Fatalf("%T on channel %d, want %d", m, ch, channel)
	}
	return m
}

func streamPartition(t *testing.T, s *streamStack, topic string) *broker.Partition {
	t.Helper()
	top, err := s.b.Topic(topic)
	if err != nil {
		t.Fatal(err)
	}
	p, err := top.Partition(0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
