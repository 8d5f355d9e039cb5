package amqp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// BenchmarkPublishConsume: one publisher and one auto-ack consumer on
// separate connections, 1 KiB transient messages through a classic queue;
// b.N messages end to end.
func BenchmarkPublishConsume(b *testing.B) {
	benchFlow(b, false, amqp091.Transient, true, 1000, false)
}

// BenchmarkPublishConsumeManualAck: as BenchmarkPublishConsume, but the
// consumer has prefetch 200 and acks every delivery on its own (the
// bench/compare AMQP transient workload).
func BenchmarkPublishConsumeManualAck(b *testing.B) {
	benchFlow(b, false, amqp091.Transient, false, 200, true)
}

// BenchmarkPublishConfirmDurable: persistent messages to a durable queue
// with publisher confirms (group-committed fsyncs) and manual acks.
func BenchmarkPublishConfirmDurable(b *testing.B) {
	benchFlow(b, true, amqp091.Persistent, false, 1000, false)
}

func benchFlow(b *testing.B, confirm bool, mode uint8, autoAck bool, prefetch int, ackEach bool) {
	br := startBroker(b, func(c *Config) { c.Logger = slog.New(slog.DiscardHandler) })
	pub, sub := br.channel(), br.channel()
	declareQueue(b, pub, "bench", mode == amqp091.Persistent)
	if err := sub.Qos(prefetch, 0, false); err != nil {
		b.Fatal(err)
	}
	deliveries := consume(b, sub, "bench", autoAck)
	var confirms chan amqp091.Confirmation
	if confirm {
		if err := pub.Confirm(false); err != nil {
			b.Fatal(err)
		}
		confirms = pub.NotifyPublish(make(chan amqp091.Confirmation, 4096))
	}
	payload := bytes.Repeat([]byte("x"), 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < b.N; i++ {
			d := <-deliveries
			switch {
			case autoAck:
			case ackEach:
				d.Ack(false)
			case i%100 == 99 || i == b.N-1:
				d.Ack(true)
			}
		}
	}()
	if confirm {
		go func() {
			for range b.N {
				<-confirms
			}
		}()
	}
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for range b.N {
		if err := pub.PublishWithContext(b.Context(), "", "bench", false, false,
			amqp091.Publishing{DeliveryMode: mode, Body: payload}); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}

// BenchmarkFanoutConfirmDurable: the bench/compare fanout row in process.
// One publisher connection sends b.N 1 KiB persistent messages to a
// durable fanout exchange bound to 10 durable queues, with at most 256
// unconfirmed; one consumer connection has a channel per queue (prefetch
// 200) acking each delivery. Reports messages published per second and
// the publish-to-deliver latency of every delivery (p50, p99).
func BenchmarkFanoutConfirmDurable(b *testing.B) {
	const queues, window = 10, 256
	br := startBroker(b, func(c *Config) { c.Logger = slog.New(slog.DiscardHandler) })
	pub := br.channel()
	if err := pub.ExchangeDeclare("fan", "fanout", true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	subConn := br.dial()
	latencies := make([][]time.Duration, queues)
	var wg sync.WaitGroup
	for i := range queues {
		name := fmt.Sprintf("fan-%d", i)
		declareQueue(b, pub, name, true)
		if err := pub.QueueBind(name, "", "fan", false, nil); err != nil {
			b.Fatal(err)
		}
		sub := openChannel(b, subConn)
		if err := sub.Qos(200, 0, false); err != nil {
			b.Fatal(err)
		}
		deliveries := consume(b, sub, name, false)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, b.N)
			for range b.N {
				d := <-deliveries
				sent := int64(binary.BigEndian.Uint64(d.Body))
				lat = append(lat, time.Duration(time.Now().UnixNano()-sent))
				d.Ack(false)
			}
			latencies[i] = lat
		}()
	}
	if err := pub.Confirm(false); err != nil {
		b.Fatal(err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, window))
	slots := make(chan struct{}, window)
	go func() {
		for range b.N {
			<-confirms
			<-slots
		}
	}()
	payload := make([]byte, 1024)
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for range b.N {
		slots <- struct{}{}
		binary.BigEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
		if err := pub.PublishWithContext(b.Context(), "fan", "", false, false,
			amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: payload}); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.StopTimer()
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(float64(all[len(all)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100])/1e6, "p99-ms")
}
