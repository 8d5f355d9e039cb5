package amqp

import (
	"bytes"
	"log/slog"
	"testing"

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
